import { CpuGpt } from '@shoal/model';
import { createRoom, must, replicaStates } from '@shoal/sim/test-room';
import { describe, expect, it } from 'vitest';

const bitsEqual = (a: Float32Array, b: Float32Array) =>
  a.length === b.length &&
  Buffer.compare(
    Buffer.from(a.buffer, a.byteOffset, a.byteLength),
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  ) === 0;

/** Two workers on the same batches, w0 on the engine `simd[0]`, w1 on `simd[1]`, for 4 s of virtual time. */
async function pair(simd: [boolean, boolean]) {
  const room = await createRoom({ workers: 2, spec: (i) => ({ simd: simd[i], dataWorker: 0 }) });
  room.startAll();
  await room.finish(4_000);
  const local = [await room.localParams(must(room.workers[0])), await room.localParams(must(room.workers[1]))] as const;
  return { room, local };
}

describe('workers whose inner loops sum in different orders', () => {
  it('hold different θ_local but bitwise-equal θ_global', async () => {
    const { config } = await createRoom({ workers: 0 });
    // The two CPU engines: WebAssembly SIMD matmuls (4×8 tiles) and the plain JS loops.
    expect(new CpuGpt(config.model, 4, 64, Float32Array, { simd: true }).backendName).toBe('wasm-simd');
    expect(new CpuGpt(config.model, 4, 64, Float32Array, { simd: false }).backendName).toBe('js');

    const { room, local } = await pair([true, false]);
    const { host, workers } = room;
    const commits = room.committed();
    for (const p of [0, 1]) expect(commits.filter((c) => c.fragment === p).length).toBeGreaterThanOrEqual(3);
    expect(room.aborted()).toEqual([]);
    for (const c of commits) expect(c).toMatchObject({ participants: 2 });

    // Same data, same init, same rounds: θ_local differs only by the engines' summation order.
    let differing = 0;
    for (let i = 0; i < local[0].length; i++) if (local[0][i] !== local[1][i]) differing++;
    expect(differing / local[0].length).toBeGreaterThan(0.1);

    // θ_global: the same bits on both workers and the host (hashes, and every value).
    const hostStates = host.fragmentStates();
    expect(hostStates.every((f) => f.round >= 3)).toBe(true);
    const globalOf = (w: (typeof workers)[number]) =>
      must(w.worker.replica).state.params(new Float32Array(local[0].length));
    for (const w of workers) {
      expect(replicaStates(w.worker)).toEqual(hostStates);
      expect(bitsEqual(globalOf(w), host.params())).toBe(true);
    }
    expect(bitsEqual(globalOf(must(workers[0])), local[0])).toBe(false);
  });

  it('control: on the same engine the two θ_local are bitwise equal (the difference above is the engine)', async () => {
    const { local } = await pair([true, true]);
    expect(bitsEqual(local[0], local[1])).toBe(true);
  });
});
