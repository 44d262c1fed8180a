// WGSL files are imported as text: Vite handles `?raw`, and in Node apps/cli/bin/raw-loader.mjs does.
declare module '*.wgsl?raw' {
  const source: string;
  export default source;
}
