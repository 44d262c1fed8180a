// Element-wise ops on flat f32 ranges (DiLoCo parameter fragments, n up to tens of millions).
// One invocation per element on a 2D grid of workgroups, so n may exceed 65535 workgroups:
// workgroup (x, y) covers elements [(y·groups.x + x)·WORKGROUP_SIZE, … + WORKGROUP_SIZE);
// the tail of the last row of workgroups falls past n and does nothing.
//
// Bindings by entry point (each uses a subset; see vector.ts):
//   difference  dst = src − src2          (out, a, b)
//   lerp        dst = α·dst + (1−α)·src   (a, b), in place
//   copy        dst = src
//   scale       dst = s·dst, in place
//   fill        dst = value

// Every storage binding is read_write, inputs too: WebGPU tracks usage per buffer, not per range,
// so a read-only and a writable binding of the same buffer in one dispatch is a validation error,
// and the model packs many tensors into one buffer.

override WORKGROUP_SIZE: u32 = 256;

struct Params {
  n: u32,       // elements
  scalar: f32,  // α (lerp), s (scale) or the fill value
}

@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read_write> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> src2: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn elementIndex(group: vec3u, groups: vec3u, lane: u32) -> u32 {
  return (group.y * groups.x + group.x) * WORKGROUP_SIZE + lane;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn difference(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
              @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    dst[i] = src[i] - src2[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn lerp(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    let alpha = params.scalar;
    dst[i] = alpha * dst[i] + (1.0 - alpha) * src[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn copy(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    dst[i] = src[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn scale(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
         @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    dst[i] = params.scalar * dst[i];
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn fill(@builtin(workgroup_id) group: vec3u, @builtin(num_workgroups) groups: vec3u,
        @builtin(local_invocation_index) lane: u32) {
  let i = elementIndex(group, groups, lane);
  if (i < params.n) {
    dst[i] = params.scalar;
  }
}
