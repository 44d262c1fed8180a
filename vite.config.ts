import { fileURLToPath } from 'node:url';
import { constants } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';
import { compression, defineAlgorithm } from 'vite-plugin-compression2';
import { CROSS_ORIGIN_ISOLATION_HEADERS } from './apps/server/src/isolation.ts';
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
        // this middleware answers before Vite's own, which add server.headers
        for (const [name, value] of Object.entries(CROSS_ORIGIN_ISOLATION_HEADERS)) response.setHeader(name, value);
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
  plugins: [
    mobyDickAsset(),
    // .gz and .br beside each asset over 10 kB, which the server sends to browsers that take them:
    // onnxruntime-web's 14 MB .wasm travels as about 3–4 MB, the first load's bundle as under 200 kB.
    // Brotli at quality 9, not 11: a few seconds of build instead of a minute, for a few per cent.
    compression({
      threshold: 10_240,
      include: /\.(js|mjs|css|html|json|svg|wasm|txt)$/,
      algorithms: [
        defineAlgorithm('gzip', { level: 9 }),
        defineAlgorithm('brotliCompress', { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } }),
      ],
    }),
  ],
  worker: { format: 'es', rolldownOptions: { checks: { bundlerTimings: false } } },
  build: {
    outDir: dir('dist/web'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    // the entry (React, the charts, the store, the schemas) and the room worker (the engines) are
    // each about 700 kB minified and under 200 kB as sent (brotli): a warning above 1 MB, not 500 kB
    chunkSizeWarningLimit: 1024,
    // `npm start` prints what a person needs, not the bundler's plugin timings
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
  oxc: { jsx: { runtime: 'automatic' } },
  // Cross-origin isolation (SharedArrayBuffer for the CPU engine's and onnxruntime-web's threads),
  // the same headers as `shoal server` sends (apps/server/src/isolation.ts).
  server: { port: 5173, headers: { ...CROSS_ORIGIN_ISOLATION_HEADERS } },
  preview: { headers: { ...CROSS_ORIGIN_ISOLATION_HEADERS } },
});
