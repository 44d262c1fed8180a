enable subgroups;

// Reductions across the 8 invocations of a row group (local = 8·ty + tx, tx = 0 … 7) with
// subgroup shuffles, for attention.register.forward.wgsl. The host picks this file only where
// the device has `subgroups` with subgroups of at least 8 invocations, so a row group is 8
// consecutive lanes of one subgroup. The butterfly adds in the order
// ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) on every lane, as the workgroup-memory
// version does: both give the same bits.

fn groupMax(x: vec4f, local: u32) -> vec4f {
  let a = max(x, subgroupShuffleXor(x, 1u));
  let b = max(a, subgroupShuffleXor(a, 2u));
  return max(b, subgroupShuffleXor(b, 4u));
}

fn groupSum(x: vec4f, local: u32) -> vec4f {
  let a = x + subgroupShuffleXor(x, 1u);
  let b = a + subgroupShuffleXor(a, 2u);
  return b + subgroupShuffleXor(b, 4u);
}
