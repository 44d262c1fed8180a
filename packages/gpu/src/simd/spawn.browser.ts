/**
 * Kernel threads in browsers: Web Workers from a blob: URL holding THREAD_SOURCE (a
 * Content-Security-Policy in front of the app must allow `worker-src blob:`), handed their memory
 * and modules in the first message. A shared memory crosses to them only where the page is
 * cross-origin isolated (COOP and COEP headers: docs/deployment.md); elsewhere the CPU backend
 * runs on one thread.
 */
import { registerThreadSpawner } from './threads.cpu.ts';

registerThreadSpawner((source, data) => {
  const script = `onmessage = (event) => {\n  onmessage = null;\n  (${source})(event.data);\n};`;
  const url = URL.createObjectURL(new Blob([script], { type: 'text/javascript' }));
  const worker = new Worker(url, { name: `shoal kernel thread ${data.index}` });
  worker.postMessage(data);
  // The worker has fetched its script once it runs; the URL is not needed after a while.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return { terminate: () => worker.terminate() };
});
