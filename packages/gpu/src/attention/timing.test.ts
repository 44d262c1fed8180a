import { it } from 'vitest';
import { createComputePipeline } from '../shader.ts';
import { useGpu } from '../test-gpu.ts';
import common from './attention.common.wgsl?raw';
import forward from './attention.forward.wgsl?raw';
import bq from './attention.backward-query.wgsl?raw';
import bk from './attention.backward-key.wgsl?raw';
import { chooseTiling, FORWARD_ARRAYS, BACKWARD_QUERY_ARRAYS, BACKWARD_KEY_ARRAYS, tilingConstants } from './attention.tiling.ts';
const gpu = useGpu();
it('timing', async () => {
  const { device } = gpu();
  for (const hs of [8, 64, 128]) {
    for (const [name, src, arrays] of [['fwd', forward, FORWARD_ARRAYS], ['bq', bq, BACKWARD_QUERY_ARRAYS], ['bk', bk, BACKWARD_KEY_ARRAYS]] as const) {
      const t0 = performance.now();
      await createComputePipeline(device, name, `${common}\n${src}`, tilingConstants(chooseTiling(hs, arrays)));
      console.log(`hs ${hs} ${name} ${(performance.now() - t0).toFixed(0)} ms ${JSON.stringify(chooseTiling(hs, arrays))}`);
    }
  }
});
