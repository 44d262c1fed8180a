/// <reference lib="webworker" />
/**
 * The sampling worker: ONNX export and onnxruntime-web off the page's thread, so the dashboard
 * stays responsive while a model is exported and sampled. One request at a time; the page stops
 * a generation by terminating the worker.
 */
import { sample } from './sample-engine.ts';
import type { WorkerEvent, WorkerRequest } from './settings.ts';

declare const self: DedicatedWorkerGlobalScope;

let queue: Promise<void> = Promise.resolve();

self.addEventListener('message', (event: MessageEvent<WorkerRequest>) => {
  // With threads, onnxruntime starts its pthread workers from this same script and talks to
  // them in its own messages: leave those alone.
  const data = event.data as Partial<WorkerRequest> | null;
  if (typeof data?.id !== 'number' || typeof data.request !== 'object' || data.request === null) return;
  const { id, request } = data as WorkerRequest;
  queue = queue.then(() => sample(request, (e) => self.postMessage({ ...e, id } satisfies WorkerEvent)));
});
