/**
 * The page's side of sampling: starts the sampling worker on first use (Vite bundles
 * sample.worker.ts, and with it onnxruntime-web, as a separate file that loads only then),
 * forwards one request at a time and stops a generation by terminating the worker. Where module
 * workers are missing, the engine is loaded with import() and runs on the page's thread.
 */
import {
  defaultThreads,
  type SampleEvent,
  type SampleRequest,
  transferableParams,
  type WorkerEvent,
  type WorkerRequest,
} from './settings.ts';

type Emit = (event: SampleEvent) => void;

interface Active {
  id: number;
  emit: Emit;
  finish: () => void;
}

export class SampleClient {
  private worker: Worker | null = null;
  private active: Active | null = null;
  private nextId = 1;
  /** For the page-thread fallback: the current run's flag, checked by the engine between tokens. */
  private cancel = { cancelled: false };

  /**
   * Runs one generation; `emit` gets its progress, text and a final `done` or `error`. The
   * params' buffer is transferred to the worker (detached here) unless it is a view into a
   * larger one, which is copied. Resolves when the generation ends or is stopped.
   */
  async run(request: SampleRequest, emit: Emit): Promise<void> {
    this.stop();
    const numThreads = request.numThreads ?? defaultThreads();
    if (typeof Worker === 'undefined') {
      const cancel = { cancelled: false };
      this.cancel = cancel;
      const engine = await import('./sample-engine.ts');
      return engine.sample({ ...request, numThreads }, emit, () => cancel.cancelled);
    }
    // Threads need a cross-origin isolated page and an onnxruntime build that can start its own
    // workers; if that fails to load, one more try on a single thread, in a fresh worker.
    const first = await this.runInWorker({ ...request, numThreads }, emit, numThreads > 1);
    if (first !== 'retry-single-thread') return;
    this.dropWorker();
    await this.runInWorker({ ...request, numThreads: 1 }, emit, false);
  }

  /** Stops the generation in progress (the worker is terminated; the next run starts a new one). */
  stop(): void {
    this.cancel.cancelled = true;
    if (this.active) this.dropWorker();
    const active = this.active;
    this.active = null;
    active?.finish();
  }

  /** Stops and frees the worker (onnxruntime's memory goes with it). */
  dispose(): void {
    this.stop();
    this.dropWorker();
  }

  private dropWorker(): void {
    this.worker?.terminate();
    this.worker = null;
  }

  private startWorker(): Worker {
    const worker = new Worker(new URL('./sample.worker.ts', import.meta.url), {
      type: 'module',
      name: 'shoal-sampling',
    });
    worker.addEventListener('message', (event: MessageEvent<WorkerEvent>) => {
      const { id, ...sampleEvent } = event.data;
      if (this.active?.id === id) this.active.emit(sampleEvent as SampleEvent);
    });
    worker.addEventListener('error', (event: ErrorEvent) => {
      event.preventDefault();
      const message = event.message || 'the script did not load';
      this.active?.emit({ type: 'error', stage: 'load', message: `The sampling worker failed: ${message}` });
      if (this.worker === worker) this.worker = null;
      worker.terminate();
      const active = this.active;
      this.active = null;
      active?.finish();
    });
    return worker;
  }

  private runInWorker(request: SampleRequest, emit: Emit, retryOnLoadError: boolean) {
    return new Promise<'finished' | 'retry-single-thread'>((resolve) => {
      this.worker ??= this.startWorker();
      const id = this.nextId++;
      const active: Active = {
        id,
        emit: (event) => {
          if (retryOnLoadError && event.type === 'error' && event.stage === 'load') {
            this.active = null;
            resolve('retry-single-thread');
            return;
          }
          emit(event);
          // onnxruntime remembers a failed start for good: the next run gets a fresh worker.
          if (event.type === 'error' && event.stage === 'load') this.dropWorker();
          if (event.type === 'done' || event.type === 'error') {
            if (this.active === active) this.active = null;
            resolve('finished');
          }
        },
        finish: () => resolve('finished'),
      };
      this.active = active;
      // A run that may be retried sends a copy: the retry needs the params again.
      const { params, transfer } = transferableParams(retryOnLoadError ? request.params.slice() : request.params);
      const message: WorkerRequest = { id, request: { ...request, params } };
      this.worker.postMessage(message, transfer);
    });
  }
}
