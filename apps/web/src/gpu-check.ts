import { acquireGpu, runSelfTest } from '@shoal/gpu';
import { store } from './store.ts';

/** Finds this browser's adapter and runs the WGSL self-test on it; results go to the store. */
export async function checkGpu(): Promise<void> {
  const { setGpu, setSelfTest } = store.getState();
  let context: Awaited<ReturnType<typeof acquireGpu>>;
  try {
    context = await acquireGpu();
  } catch (error) {
    setGpu({ kind: 'unavailable', reason: error instanceof Error ? error.message : String(error) });
    return;
  }
  setGpu({ kind: 'ready', adapter: context.report });
  setSelfTest(await runSelfTest(context.device));
  context.destroy();
}
