import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import { loadMobyDick } from './packages/data/src/corpus.node.ts';
import { browserShims } from './vite.shims.ts';

const dir = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The default corpus as a static file at /data/moby-dick.txt (design: served, not bundled into
 * the JavaScript): emitted into the build, and served by the dev server.
 */
function mobyDickAsset(): Plugin {
  const path = 'data/moby-dick.txt';
  return {
    name: 'shoal-moby-dick',
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: path, source: loadMobyDick() });
    },
    configureServer(server) {
      server.middlewares.use(`/${path}`, (_request, response) => {
        response.setHeader('content-type', 'text/plain; charset=utf-8');
        response.end(loadMobyDick());
      });
    },
  };
}

// The web app lives in apps/web and builds to dist/web, which apps/server serves.
export default defineConfig({
  root: dir('apps/web'),
  publicDir: dir('public'),
  // simple-peer's prebuilt browser bundle for @shoal/mesh (why: vite.shims.ts)
  resolve: {
    alias: [
      ...browserShims.resolve.alias,
      // onnxruntime-web's WebAssembly-only build for the sampling worker (a 14 MB .wasm, not JSEP's 28 MB)
      { find: /^onnxruntime-web$/, replacement: 'onnxruntime-web/wasm' },
    ],
  },
  plugins: [mobyDickAsset()],
  worker: { format: 'es' },
  build: {
    outDir: dir('dist/web'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
  },
  oxc: { jsx: { runtime: 'automatic' } },
  server: { port: 5173 },
});
