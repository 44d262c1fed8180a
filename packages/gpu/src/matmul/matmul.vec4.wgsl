// Global memory access for matmul.wgsl when every row length (M, N, K as stored) is a multiple
// of 4: the matrices are bound as vec4 arrays, a vec4 never straddles a row end, so a row and
// column bound check per vec4 suffices. View offsets are multiples of 256 bytes, hence aligned.

@group(0) @binding(0) var<storage, read_write> matA: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> matB: array<vec4f>;
@group(0) @binding(2) var<storage, read_write> matOut: array<vec4f>; // [M,N] (or [splits][M,N])

// A[row, col … col+3] as stored: [M,K] when A_K_CONTIGUOUS, else [K,M]; col is a multiple of 4.
fn loadA4(row: u32, col: u32) -> vec4f {
  let rows = select(params.K, params.M, A_K_CONTIGUOUS);
  let cols = select(params.M, params.K, A_K_CONTIGUOUS);
  if (row < rows && col < cols) {
    return matA[(row * cols + col) / 4u];
  }
  return vec4f(0.0);
}

// B[row, col … col+3] as stored: [N,K] when B_K_CONTIGUOUS, else [K,N].
fn loadB4(row: u32, col: u32) -> vec4f {
  let rows = select(params.K, params.N, B_K_CONTIGUOUS);
  let cols = select(params.N, params.K, B_K_CONTIGUOUS);
  if (row < rows && col < cols) {
    return matB[(row * cols + col) / 4u];
  }
  return vec4f(0.0);
}

// out[base + row·N + col … +3] = value (+ the old value when accumulating), inside the matrix.
fn updateOut4(base: u32, row: u32, col: u32, value: vec4f, accumulate: bool) {
  if (row < params.M && col < params.N) {
    let index = (base + row * params.N + col) / 4u;
    matOut[index] = select(value, matOut[index] + value, accumulate);
  }
}
