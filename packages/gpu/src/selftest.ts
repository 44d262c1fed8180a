/**
 * A quick check that WGSL compute works on this adapter: the parallel sum over a few sizes
 * (including ones that are not multiples of the workgroup), each against the CPU in float64.
 * `shoal doctor` and the web page run it.
 */
import { randomFloats } from './random.ts';
import { SumKernel, sumReference, sumTolerance } from './reduce/sum.ts';

export interface SelfTestCase {
  n: number;
  got: number;
  want: number;
  tolerance: number;
  ok: boolean;
}

export interface SelfTestResult {
  pass: boolean;
  cases: SelfTestCase[];
  milliseconds: number;
  error?: string;
}

const SELF_TEST_SIZES = [1, 255, 1000, 65_537, 1_000_003];

export async function runSelfTest(device: GPUDevice, sizes: number[] = SELF_TEST_SIZES): Promise<SelfTestResult> {
  const started = performance.now();
  const cases: SelfTestCase[] = [];
  try {
    const kernel = await SumKernel.create(device);
    for (const [index, n] of sizes.entries()) {
      const values = randomFloats(n, 1234 + index);
      const got = await kernel.sum(values);
      const want = sumReference(values);
      const tolerance = sumTolerance(values);
      cases.push({ n, got, want, tolerance, ok: Math.abs(got - want) <= tolerance });
    }
  } catch (error) {
    return { pass: false, cases, milliseconds: performance.now() - started, error: String(error) };
  }
  return { pass: cases.every((c) => c.ok), cases, milliseconds: performance.now() - started };
}
