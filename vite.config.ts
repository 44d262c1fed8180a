import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { browserShims } from './vite.shims.ts';

const dir = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// The web app lives in apps/web and builds to dist/web, which apps/server serves.
export default defineConfig({
  root: dir('apps/web'),
  publicDir: dir('public'),
  // simple-peer's prebuilt browser bundle for @shoal/mesh (why: vite.shims.ts)
  resolve: browserShims.resolve,
  build: {
    outDir: dir('dist/web'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
  },
  oxc: { jsx: { runtime: 'automatic' } },
  server: { port: 5173 },
});
