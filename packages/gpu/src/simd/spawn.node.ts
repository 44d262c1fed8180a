/**
 * Kernel threads in Node: worker_threads running THREAD_SOURCE from a string (eval), so they need
 * no file or loader. Unref'd: idle kernel threads never keep a process alive.
 */
import { Worker } from 'node:worker_threads';
import { registerThreadSpawner } from './threads.cpu.ts';

registerThreadSpawner((source, data) => {
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
});
