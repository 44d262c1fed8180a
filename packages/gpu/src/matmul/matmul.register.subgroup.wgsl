// Slice multiplier of matmul.register.wgsl with subgroups. The four lanes of a quad hold the
// same rows (consecutive lx, one ly: WG_X is a multiple of 4 and the drivers we know form
// subgroups from consecutive local invocation indices; the start-up check refuses the kernel
// where that does not hold). Over four k the quad reads A from workgroup memory once per lane,
// lane q the fragment of k + q, and passes it to the others with quadBroadcast: a quarter of the
// A reads, traded for register shuffles. Whether that wins depends on the adapter (NVIDIA's
// workgroup memory already broadcasts equal addresses), so the tile search measures it.

fn multiplySlice(aBase: u32, bBase: u32, lx: u32, ly: u32, lid: u32) {
  let q = lid & 3u;
  for (var k = 0u; k < TILE_K; k += 4u) {
    let at = aBase + (k + q) * A_STRIDE + ly;
    let a0 = tileA[at];
    let a1 = tileA[at + WG_Y];
    var b = fragmentB(bBase, k, lx);
    multiplyStep(quadBroadcast(a0, 0u), quadBroadcast(a1, 0u), b[0], b[1]);
    b = fragmentB(bBase, k + 1u, lx);
    multiplyStep(quadBroadcast(a0, 1u), quadBroadcast(a1, 1u), b[0], b[1]);
    b = fragmentB(bBase, k + 2u, lx);
    multiplyStep(quadBroadcast(a0, 2u), quadBroadcast(a1, 2u), b[0], b[1]);
    b = fragmentB(bBase, k + 3u, lx);
    multiplyStep(quadBroadcast(a0, 3u), quadBroadcast(a1, 3u), b[0], b[1]);
  }
}
