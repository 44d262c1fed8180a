import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PRESETS } from '../packages/model/src/config.ts';
import { buildLayout } from '../packages/model/src/layout.ts';
import { defaultTrainConfig } from '../packages/model/src/train-config.ts';
import {
  gradsRequest,
  parseTorchReply,
  pythonCandidates,
  setupRequest,
  startTorch,
  TorchChild,
  type TorchSetup,
  toBase64,
} from './torch-child.ts';

describe('parseTorchReply', () => {
  const hello = { torch: '1.13.0', python: '3.11.2', executable: '/usr/bin/python3', threads: 2, blas: null };

  test('each kind of reply', () => {
    expect(parseTorchReply(JSON.stringify({ ok: true, hello }))).toEqual({ kind: 'hello', hello });
    expect(parseTorchReply('{"ok":false,"missingTorch":true,"error":"No module named torch"}')).toEqual({
      kind: 'missing-torch',
      error: 'No module named torch',
    });
    expect(parseTorchReply('{"ok":false,"error":"ValueError: x"}')).toEqual({ kind: 'error', error: 'ValueError: x' });
    expect(parseTorchReply('{"ok":true,"parameters":120576}')).toEqual({ kind: 'setup', parameters: 120576 });
    expect(parseTorchReply('{"ok":true,"ms":[1.5,2],"cpuMs":[1,2],"losses":[5.5,5.4]}')).toEqual({
      kind: 'run',
      samples: { ms: [1.5, 2], cpuMs: [1, 2], losses: [5.5, 5.4] },
    });
    expect(parseTorchReply('{"ok":true,"flops":8.07e8}')).toEqual({ kind: 'flops', flops: 8.07e8 });
    expect(parseTorchReply('{"ok":true,"flops":null}')).toEqual({ kind: 'flops', flops: null });
    expect(parseTorchReply('{"ok":true,"precision":"tf32"}')).toEqual({ kind: 'precision', precision: 'tf32' });
    expect(parseTorchReply('{"ok":true,"loss":5.5,"gradsFile":"/tmp/g"}')).toEqual({
      kind: 'grads',
      loss: 5.5,
      gradsFile: '/tmp/g',
    });
  });

  test.each([
    ['Traceback (most recent call last):', /not JSON/],
    ['[1,2]', /without ok/],
    ['{"ok":"yes"}', /without ok/],
    [JSON.stringify({ ok: true, hello: { ...hello, threads: 0 } }), /malformed hello/],
    [JSON.stringify({ ok: true, hello: { ...hello, blas: 3 } }), /malformed hello/],
    ['{"ok":true,"parameters":1.5}', /not a positive integer/],
    ['{"ok":true,"ms":[],"cpuMs":[],"losses":[]}', /no steps/],
    ['{"ok":true,"ms":[1,2],"cpuMs":[1],"losses":[5,5]}', /cpuMs has 1 values, expected 2/],
    ['{"ok":true,"ms":[1],"cpuMs":[1],"losses":[null]}', /losses is not a list of finite numbers/],
    ['{"ok":true,"flops":-1}', /neither null nor a positive number/],
    ['{"ok":true,"precision":"fp16"}', /unknown precision/],
    ['{"ok":true,"loss":null,"gradsFile":"/tmp/g"}', /malformed grads reply/],
    ['{"ok":true,"something":1}', /no known kind/],
  ])('%s is refused', (line, message) => {
    expect(() => parseTorchReply(line)).toThrow(message);
  });
});

test('pythonCandidates: --python, else SHOAL_PYTHON, else PATH and Debian', () => {
  expect(pythonCandidates('/opt/py', { SHOAL_PYTHON: '/x' })).toEqual(['/opt/py']);
  expect(pythonCandidates(undefined, { SHOAL_PYTHON: '/x' })).toEqual(['/x']);
  expect(pythonCandidates(undefined, {})).toEqual(['python3', '/usr/bin/python3']);
});

function nanoSetup(): TorchSetup {
  const config = PRESETS.nano;
  const layout = buildLayout(config);
  const params = Float32Array.from({ length: layout.size }, (_, i) => i / 7 - 3);
  const tokens = Int32Array.from({ length: 4 * 8 }, (_, i) => (i * 37) % 256);
  return {
    config,
    layout,
    B: 4,
    T: 8,
    params,
    batches: [{ inputs: tokens, targets: tokens }],
    train: defaultTrainConfig({ batchSize: 4, seqLen: 8 }),
    lr: 1e-3,
  };
}

test('setupRequest carries the layout and the exact float32 bytes', () => {
  const setup = nanoSetup();
  const request = setupRequest(setup);
  const bytes = Buffer.from(request.params as string, 'base64');
  expect(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)).toEqual(setup.params);
  const tensors = request.tensors as { name: string; shape: number[]; offset: number }[];
  expect(tensors).toHaveLength(setup.layout.tensors.length);
  expect(tensors[0]).toEqual({ name: 'transformer.wte.weight', shape: [256, 64], offset: 0 });
  expect(request.train).toEqual({ beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClip: 1 });
  expect(() => setupRequest({ ...setup, params: setup.params.subarray(1) })).toThrow(/layout needs/);
});

test('with a paramsFile, setup and grads requests name the file instead of carrying the bytes', () => {
  const setup = {
    ...nanoSetup(),
    paramsFile: '/tmp/params.f32',
    precision: 'bf16' as const,
    attention: 'sdpa' as const,
  };
  const request = setupRequest(setup);
  expect(request.params).toBeUndefined();
  expect(request).toMatchObject({ paramsFile: '/tmp/params.f32', precision: 'bf16', attention: 'sdpa' });
  const { config, layout, params } = setup;
  const tokens = Int32Array.from({ length: 4 * 8 }, (_, i) => i % 256);
  const grads = { config, layout, B: 4, T: 8, params, inputs: tokens, targets: tokens, gradsFile: '/tmp/g.f64' };
  expect(gradsRequest(grads)).toMatchObject({ op: 'grads', gradsFile: '/tmp/g.f64', params: expect.any(String) });
  expect(() => gradsRequest({ ...grads, targets: tokens.subarray(1) })).toThrow(/targets have 31 tokens/);
});

test('toBase64 encodes a subarray’s own bytes, not its whole buffer', () => {
  const ints = Int32Array.from([1, 2, 3, 4]).subarray(1, 3);
  expect(Buffer.from(toBase64(ints), 'base64')).toEqual(Buffer.from(Int32Array.from([2, 3]).buffer));
});

/**
 * A stand-in for torch_step.py, run by node, speaking the same protocol (FAKE_TORCH sets how it
 * misbehaves), so the client is tested where no torch is installed.
 */
const FAKE_CHILD = `
import { createInterface } from 'node:readline';
const mode = process.env.FAKE_TORCH ?? 'ok';
const reply = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
if (mode === 'missing') {
  reply({ ok: false, missingTorch: true, error: "No module named 'torch'" });
  process.exit(3);
}
reply({ ok: true, hello: { torch: 'fake', python: '0', executable: process.execPath, threads: Number(process.argv[3]), blas: null } });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line);
  if (m.op === 'quit') process.exit(0);
  if (m.op === 'setup' && mode === 'refuse') reply({ ok: false, error: "ValueError: the PyTorch model has no parameter 'x'" });
  else if (m.op === 'setup') reply({ ok: true, parameters: Buffer.from(m.params, 'base64').length / 4 });
  else if (m.op === 'run' && mode === 'crash') process.exit(9);
  else if (m.op === 'run' && mode === 'short') reply({ ok: true, ms: [1], cpuMs: [1], losses: [5] });
  else if (m.op === 'run') {
    const steps = Array.from({ length: m.steps }, (_, i) => i + 1);
    reply({ ok: true, ms: steps, cpuMs: steps.map((s) => 2 * s), losses: steps.map((s) => 5.5 - s / 100) });
  } else if (m.op === 'flops') reply({ ok: true, flops: 1234 });
  else if (m.op === 'precision') reply({ ok: true, precision: m.precision });
  else if (m.op === 'grads') reply({ ok: true, loss: 5.25, gradsFile: m.gradsFile });
  else reply({ ok: false, error: 'ValueError: unknown op ' + m.op });
}
`;

describe('TorchChild against a stand-in child', () => {
  let dir: string;
  let script: string;
  const node = process.execPath;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'torch-child-'));
    script = join(dir, 'fake-torch.mjs');
    writeFileSync(script, FAKE_CHILD);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function start(mode: string): Promise<TorchChild> {
    process.env.FAKE_TORCH = mode;
    try {
      const started = await TorchChild.start(node, 2, script);
      if (!('child' in started)) throw new Error(`did not start: ${started.missing}`);
      return started.child;
    } finally {
      delete process.env.FAKE_TORCH;
    }
  }

  test('hello, setup, runs and flops, then quits', async () => {
    const child = await start('ok');
    expect(child.hello.threads).toBe(2);
    await child.setup(nanoSetup());
    expect(await child.run(3)).toEqual({ ms: [1, 2, 3], cpuMs: [2, 4, 6], losses: [5.49, 5.48, 5.47] });
    expect(await child.run(1)).toEqual({ ms: [1], cpuMs: [2], losses: [5.49] });
    expect(await child.flops()).toBe(1234);
    await child.setPrecision('tf32');
    const setup = nanoSetup();
    const tokens = Int32Array.from({ length: 32 }, (_, i) => i);
    const { config, layout, params } = setup;
    const grads = { config, layout, B: 4, T: 8, params, inputs: tokens, targets: tokens, gradsFile: '/tmp/g' };
    expect(await child.grads(grads)).toBe(5.25);
    await child.close();
  });

  test('an error reply rejects the request with the child’s message; the child stays up', async () => {
    const child = await start('refuse');
    await expect(child.setup(nanoSetup())).rejects.toThrow(
      /\(setup\): ValueError: the PyTorch model has no parameter 'x'/,
    );
    expect(await child.flops()).toBe(1234);
    await child.close();
  });

  test('a run answered with the wrong number of steps is refused', async () => {
    const child = await start('short');
    await expect(child.run(4)).rejects.toThrow(/a run of 4 steps/);
    await child.close();
  });

  test('a child that dies mid-request rejects it, and every later one', async () => {
    const child = await start('crash');
    await expect(child.run(2)).rejects.toThrow(/exited \(code 9/);
    await expect(child.run(2)).rejects.toThrow(/exited \(code 9/);
    await child.close();
  });

  test('startTorch goes past a missing Python and one without torch, and says why for each', async () => {
    process.env.FAKE_TORCH = 'missing';
    try {
      const none = await startTorch(['/nonexistent/python3', node], 1, script);
      expect(none).toEqual({
        missing: [expect.stringContaining('/nonexistent/python3: spawn'), `${node}: No module named 'torch'`],
      });
    } finally {
      delete process.env.FAKE_TORCH;
    }
    const found = await startTorch(['/nonexistent/python3', node], 1, script);
    if (!('child' in found)) throw new Error(`expected a child, got ${found.missing.join('; ')}`);
    expect(found.child.hello.threads).toBe(1);
    await found.child.close();
  });
});
