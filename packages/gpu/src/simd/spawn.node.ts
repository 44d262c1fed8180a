/**
 * Kernel threads in Node: worker_threads running THREAD_SOURCE from a string (eval), so they need
 * no file or loader. Unref'd: idle kernel threads never keep a process alive.
 */
import { Worker } from 'node:worker_threads';
import { registerThreadSpawner, type ThreadSpawner } from './threads.cpu.ts';

export const nodeThreadSpawner: ThreadSpawner = (source, data) => {
  const worker = new Worker(`const { workerData } = require('node:worker_threads');\n(${source})(workerData);`, {
    eval: true,
    workerData: data,
  });
  worker.unref();
  return {
    terminate: () => {
      void worker.terminate();
    },
  };
};

registerThreadSpawner(nodeThreadSpawner);
