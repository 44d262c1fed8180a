// x rounded to the nearest f16 (ties to even), computed in f32 arithmetic: pack2x16float is no
// help, Mesa folds unpack2x16float(pack2x16float(v)) into v. Below f16's normal range the
// quantum is 2⁻²⁴ (subnormals). Past its largest finite value x saturates to ±65504, as the
// conversion in the tensor-core kernel does (toT in matrix.ts), never to ∞.
fn roundF16(x: f32) -> f32 {
  let a = abs(x);
  if (a >= 65520.0) {
    return sign(x) * 65504.0;
  }
  if (a < 6.103515625e-5) {
    return round(x * 16777216.0) / 16777216.0; // round() ties to even; both scalings exact
  }
  // 10 of f32's 23 mantissa bits survive: add half of the dropped part (ties to even), truncate.
  let bits = bitcast<u32>(x);
  let kept = bits + 0x0fffu + ((bits >> 13u) & 1u);
  return bitcast<f32>(kept & 0xffffe000u);
}
