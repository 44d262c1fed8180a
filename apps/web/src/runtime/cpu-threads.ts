import { defaultCpuThreads } from '@shoal/model';

/**
 * Threads for the CPU engine in this browser context (a page or a worker): every core up to
 * the engine's default cap where the page is cross-origin isolated (the kernel threads share one
 * WebAssembly memory, which needs SharedArrayBuffer), else one.
 */
export function browserCpuThreads(): number {
  if (!globalThis.crossOriginIsolated) return 1;
  return defaultCpuThreads(globalThis.navigator?.hardwareConcurrency);
}

/** How the CPU engine is named on the page: 'CPU (WebAssembly SIMD, 4 threads)'. */
export function cpuEngineName(threads: number): string {
  return `CPU (WebAssembly SIMD, ${threads} thread${threads === 1 ? '' : 's'})`;
}
