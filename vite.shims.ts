/**
 * What a browser bundle of @shoal/mesh needs from Vite: shared by the web app's build
 * (vite.config.ts) and the mesh benchmark's page (bench/mesh/browser.ts).
 *
 * simple-peer 9 is CommonJS written for browserify. Its sources require Node's `buffer` and
 * `events` (through readable-stream 3), call a global `process.nextTick` and read `global`:
 * bundled as they are, Vite stubs the built-ins out and the page fails at load. The package also
 * ships `simplepeer.min.js`, the same version built by browserify with those shims inside (UMD,
 * about 100 kB, 30 kB gzipped). Aliasing the bare `simple-peer` import to that file needs no
 * polyfill packages and defines no globals for anyone else's code. Only the browser bundle sees
 * the alias: Node (tsx, Vitest) keeps loading simple-peer's sources with @roamhq/wrtc.
 */
import { createRequire } from 'node:module';
import type { UserConfig } from 'vite';

// resolved from @shoal/mesh, the package that depends on simple-peer
const require = createRequire(new URL('./packages/mesh/package.json', import.meta.url));

export const browserShims = {
  resolve: {
    alias: [{ find: /^simple-peer$/, replacement: require.resolve('simple-peer/simplepeer.min.js') }],
  },
} satisfies UserConfig;
