// Global memory access for matmul.wgsl when some row length is not a multiple of 4: the
// matrices are bound as f32 arrays and each of the four lanes is checked on its own.

@group(0) @binding(0) var<storage, read_write> matA: array<f32>;
@group(0) @binding(1) var<storage, read_write> matB: array<f32>;
@group(0) @binding(2) var<storage, read_write> matOut: array<f32>; // [M,N] (or [splits][M,N])

// A[row, col … col+3] as stored ([M,K] when A_K_CONTIGUOUS, else [K,M]); zero past the edges.
fn loadA4(row: u32, col: u32) -> vec4f {
  let rows = select(params.K, params.M, A_K_CONTIGUOUS);
  let cols = select(params.M, params.K, A_K_CONTIGUOUS);
  var v = vec4f(0.0);
  if (row < rows) {
    let base = row * cols + col;
    for (var c = 0u; c < 4u; c++) {
      if (col + c < cols) {
        v[c] = matA[base + c];
      }
    }
  }
  return v;
}

// B[row, col … col+3] as stored ([N,K] when B_K_CONTIGUOUS, else [K,N]); zero past the edges.
fn loadB4(row: u32, col: u32) -> vec4f {
  let rows = select(params.K, params.N, B_K_CONTIGUOUS);
  let cols = select(params.N, params.K, B_K_CONTIGUOUS);
  var v = vec4f(0.0);
  if (row < rows) {
    let base = row * cols + col;
    for (var c = 0u; c < 4u; c++) {
      if (col + c < cols) {
        v[c] = matB[base + c];
      }
    }
  }
  return v;
}

// out[base + row·N + col + c] = value[c] (+ the old value when accumulating), inside the matrix.
fn updateOut4(base: u32, row: u32, col: u32, value: vec4f, accumulate: bool) {
  if (row < params.M) {
    let index = base + row * params.N + col;
    for (var c = 0u; c < 4u; c++) {
      if (col + c < params.N) {
        matOut[index + c] = select(value[c], matOut[index + c] + value[c], accumulate);
      }
    }
  }
}
