/**
 * The response headers that make Shoal's pages cross-origin isolated (`crossOriginIsolated`):
 * SharedArrayBuffer and a shared WebAssembly.Memory exist only there, and the CPU engine's kernel
 * threads and onnxruntime-web's threads both need one. Defined here once; every server of the
 * web app sends them on every response: this server (index.ts, which Playwright's e2e runs too),
 * Vite's dev server and its preview (vite.config.ts). docs/deployment.md says what a reverse
 * proxy in front must keep.
 *
 * Dependency-free: vite.config.ts imports this file directly.
 */
export const CROSS_ORIGIN_ISOLATION_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  // The page gets a browsing context group of its own: cross-origin windows it opens, or that
  // open it, lose their handle to it (window.opener is null across origins).
  'cross-origin-opener-policy': 'same-origin',
  // require-corp, not credentialless: everything the app loads is same-origin (its scripts, module
  // and blob: workers, onnxruntime-web's .wasm, the corpus, the favicon), so require-corp blocks
  // nothing, and Safari (15.2+) isolates a page with require-corp but has no credentialless. CORS
  // fetches (a corpus from another site) are not subject to it; a cross-origin <img> or <script>
  // without CORS would be. On a worker's script the header is what lets the worker start at all
  // under an isolated page.
  'cross-origin-embedder-policy': 'require-corp',
  // Our own responses may be read by our own origin only: another site's isolated page cannot
  // embed them, and ours needs nothing more (same-origin loads pass require-corp regardless).
  'cross-origin-resource-policy': 'same-origin',
});
