// Slice multiplier of matmul.register.wgsl without subgroups: every invocation reads its own A
// and B fragments from workgroup memory at each k (lanes with the same rows read the same A).

fn multiplySlice(aBase: u32, bBase: u32, lx: u32, ly: u32, lid: u32) {
  for (var k = 0u; k < TILE_K; k++) {
    let at = aBase + k * A_STRIDE + ly;
    let b = fragmentB(bBase, k, lx);
    multiplyStep(tileA[at], tileA[at + WG_Y], b[0], b[1]);
  }
}
