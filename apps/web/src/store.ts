/**
 * The app's state: one zustand store built with `zustand/vanilla`, so non-React code (GPU checks
 * now; the training worker and the mesh later) updates it directly and React only subscribes.
 */
import type { AdapterReport, SelfTestResult } from '@shoal/gpu';
import { createStore } from 'zustand/vanilla';

export type GpuStatus =
  | { kind: 'checking' }
  | { kind: 'ready'; adapter: AdapterReport }
  | { kind: 'unavailable'; reason: string };

export interface GpuSlice {
  gpu: GpuStatus;
  selfTest: SelfTestResult | null;
  setGpu(status: GpuStatus): void;
  setSelfTest(result: SelfTestResult): void;
}

export type ShoalState = GpuSlice;

export const store = createStore<ShoalState>()((set) => ({
  gpu: { kind: 'checking' },
  selfTest: null,
  setGpu: (gpu) => set({ gpu }),
  setSelfTest: (selfTest) => set({ selfTest }),
}));

/** A plain-data snapshot for tests and debugging: `window.shoal.getState()`. */
export function snapshot() {
  const { gpu, selfTest } = store.getState();
  return structuredClone({ gpu, selfTest });
}
