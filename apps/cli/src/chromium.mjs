// Where the Chromium for `shoal doctor`, the e2e tests and the browser benches lives. Plain
// JavaScript without dependencies: scripts/bootstrap.mjs runs it under node before anything is
// installed (through scripts/chromium.mjs). CHROMIUM overrides (Ubuntu's chromium package is a
// snap stub).
import { existsSync } from 'node:fs';

export const CHROMIUM_CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The browser to drive: $CHROMIUM if set, else the first candidate that exists, else null. */
export function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  return CHROMIUM_CANDIDATES.find((path) => existsSync(path)) ?? null;
}

/** Flags for headless WebGPU on SwiftShader on a machine with a closed network. */
export const CHROMIUM_WEBGPU_ARGS = [
  '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader',
  '--enable-features=Vulkan',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
];
