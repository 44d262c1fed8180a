/**
 * For Vitest files that need a GPU: one device per file. When no adapter is found, every test in
 * the file FAILS with the NoAdapterError's explanation; nothing is skipped.
 */
import { afterAll, beforeAll } from 'vitest';
import { acquireGpu } from './device.node.ts';
import type { GpuContext } from './types.ts';

export function useGpu(): () => GpuContext {
  let context: GpuContext | undefined;
  let failure: unknown;
  beforeAll(async () => {
    try {
      context = await acquireGpu();
    } catch (error) {
      // Not rethrown here: a failed beforeAll makes Vitest report the tests as skipped. Each
      // test calls the accessor, which throws this error, so each one fails with the reason.
      failure = error;
    }
  });
  afterAll(() => context?.destroy());
  return () => {
    if (!context) throw failure instanceof Error ? failure : new Error('GPU context was not acquired');
    return context;
  };
}
