import { describe, expect, it } from 'vitest';
import { outerNesterovStep, tentativeOuterStep } from './outer.ts';

const f32 = (values: number[]) => Float32Array.from(values);

/** Distance in units in the last place between two fp32 values of the same sign. */
const ulps = (a: number, b: number) => {
  const bits = new Int32Array(Float32Array.of(a, b).buffer);
  return Math.abs((bits[0] as number) - (bits[1] as number));
};

describe('outerNesterovStep', () => {
  it('follows a sequence computed by hand (η = μ = 0.5, every value exact in binary)', () => {
    const theta = f32([1]);
    const m = f32([0]);
    const opts = { lr: 0.5, momentum: 0.5 };
    // m = 0.5·0 + 0.5 = 0.5 ; θ = 1 − 0.5·(0.5 + 0.5·0.5) = 0.625
    outerNesterovStep(theta, m, f32([0.5]), opts);
    expect([theta[0], m[0]]).toEqual([0.625, 0.5]);
    // m = 0.5·0.5 + 0.25 = 0.5 ; θ = 0.625 − 0.5·(0.25 + 0.25) = 0.375
    outerNesterovStep(theta, m, f32([0.25]), opts);
    expect([theta[0], m[0]]).toEqual([0.375, 0.5]);
    // m = 0.5·0.5 − 1 = −0.75 ; θ = 0.375 − 0.5·(−1 − 0.375) = 1.0625
    outerNesterovStep(theta, m, f32([-1]), opts);
    expect([theta[0], m[0]]).toEqual([1.0625, -0.75]);
  });

  // Expected values: a float64 evaluation of each element's expression, rounded to fp32 at the
  // stores of m and θ (numpy), written as the shortest decimals that name those fp32 values.
  const theta0 = [0.1, -0.3, 1e-3, 12.5];
  const deltas = [
    [0.01, -0.02, 3e-5, 0.5],
    [0.02, 0.01, -1e-5, -0.25],
    [-0.005, 0.03, 2e-5, 0.125],
    [0, -0.01, 0, 1],
  ];
  const expected = [
    { theta: [0.0867, -0.2734, 0.00096010003, 11.835], m: [0.01, -0.02, 0.00003, 0.5] },
    { theta: [0.05443, -0.27536002, 0.00095639005, 11.884], m: [0.029, -0.007999999, 0.000017, 0.2] },
    { theta: [0.044637002, -0.31072402, 0.00092015107, 11.60435], m: [0.0211, 0.0228, 0.0000353, 0.305] },
    { theta: [0.032673303, -0.3103516, 0.00090013596, 10.101415], m: [0.018989999, 0.010520001, 0.00003177, 1.2745] },
  ];

  it('matches a float64 reference bit for bit over 4 steps with the defaults η = 0.7, μ = 0.9', () => {
    const theta = f32(theta0);
    const m = new Float32Array(4);
    deltas.forEach((delta, step) => {
      outerNesterovStep(theta, m, f32(delta));
      expect(theta, `θ after step ${step + 1}`).toEqual(f32(expected[step]?.theta ?? []));
      expect(m, `m after step ${step + 1}`).toEqual(f32(expected[step]?.m ?? []));
    });
  });

  it('stays within 1 ulp of PyTorch-style fp32 arithmetic (buffer = Δ̄ on step 1, rounding after each op)', () => {
    // numpy float32 replay of torch.optim.SGD(nesterov=True): buf = clone(g); then
    // buf = 0.9f·buf + g ; p = p − 0.7f·(g + 0.9f·buf).
    const torchTheta = [0.032673303, -0.3103516, 0.00090013596, 10.101416];
    const torchMomentum = [0.018989999, 0.01052, 0.00003177, 1.2745];
    const theta = f32(theta0);
    const m = new Float32Array(4);
    for (const delta of deltas) outerNesterovStep(theta, m, f32(delta));
    expect([...theta].map((value, i) => ulps(value, torchTheta[i] as number))).toEqual([0, 0, 0, 1]);
    expect([...m].map((value, i) => ulps(value, torchMomentum[i] as number))).toEqual([0, 1, 0, 0]);
  });

  it("gives PyTorch's first-step buffer (m = Δ̄) when m starts at zeros", () => {
    const delta = f32([0.3, -7e-8, 1e30, 0, -2.5]);
    const m = new Float32Array(delta.length);
    const theta0 = f32([1, 2, 3, 4, 5]);
    const theta = theta0.slice();
    outerNesterovStep(theta, m, delta);
    expect(m).toEqual(delta);
    // and θ is then θ − η·(Δ̄ + μ·Δ̄), as with buf = clone(Δ̄)
    delta.forEach((d, i) => {
      expect(theta[i]).toBe(Math.fround((theta0[i] as number) - 0.7 * (d + 0.9 * d)));
    });
  });

  it('is bitwise reproducible, and an element does not depend on its neighbours', () => {
    const n = 1000;
    const theta = Float32Array.from({ length: n }, (_, i) => Math.sin(i));
    const delta = Float32Array.from({ length: n }, (_, i) => Math.cos(i) * 1e-3);
    const a = tentativeOuterStep(theta, new Float32Array(n), delta);
    const b = tentativeOuterStep(theta, new Float32Array(n), delta);
    expect(new Uint32Array(a.theta.buffer)).toEqual(new Uint32Array(b.theta.buffer));
    // element 500 on its own gives the same bits as inside the whole vector
    const single = tentativeOuterStep(theta.subarray(500, 501), new Float32Array(1), delta.subarray(500, 501));
    expect(single.theta[0]).toBe(a.theta[500]);
    // the tentative step left its inputs alone
    expect(theta[0]).toBe(Math.fround(Math.sin(0)));
  });

  it('rejects mismatched lengths and unusable hyper-parameters', () => {
    expect(() => outerNesterovStep(f32([1, 2]), f32([0]), f32([1, 2]))).toThrow(/θ 2, m 1, Δ̄ 2/);
    expect(() => outerNesterovStep(f32([1]), f32([0]), f32([1]), { lr: 0 })).toThrow(/lr must be/);
    expect(() => outerNesterovStep(f32([1]), f32([0]), f32([1]), { momentum: 1 })).toThrow(/momentum must be in/);
  });
});
