// The Chromium locator (apps/cli/src/chromium.mjs) for the bootstrap, the e2e tests and the benches.
export * from '../apps/cli/src/chromium.mjs';
