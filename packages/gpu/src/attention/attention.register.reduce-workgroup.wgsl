// Reductions across the 8 invocations of a row group (local = 8·ty + tx, tx = 0 … 7) through
// workgroup memory, for attention.register.forward.wgsl where subgroups are missing or narrower
// than 8. Called in uniform control flow; the second barrier lets the next call reuse the array.

var<workgroup> partials: array<vec4f, 64>;  // [ty, tx]

fn groupMax(x: vec4f, local: u32) -> vec4f {
  partials[local] = x;
  workgroupBarrier();
  let g = local & ~7u;
  let y = max(
    max(max(partials[g], partials[g + 1u]), max(partials[g + 2u], partials[g + 3u])),
    max(max(partials[g + 4u], partials[g + 5u]), max(partials[g + 6u], partials[g + 7u])),
  );
  workgroupBarrier();
  return y;
}

fn groupSum(x: vec4f, local: u32) -> vec4f {
  partials[local] = x;
  workgroupBarrier();
  let g = local & ~7u;
  let y = ((partials[g] + partials[g + 1u]) + (partials[g + 2u] + partials[g + 3u])) +
    ((partials[g + 4u] + partials[g + 5u]) + (partials[g + 6u] + partials[g + 7u]));
  workgroupBarrier();
  return y;
}
