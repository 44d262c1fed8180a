// Entry of a pipeline-stage worker thread (bench/pipeline.ts): a worker does not get tsx from the
// parent's `--import tsx` for its entry file, so it registers tsx and the WGSL `?raw` loader
// itself, as apps/cli/bin/shoal.mjs does, then runs the stage.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
// Registered after tsx, so it runs first for `?raw` URLs.
register('../apps/cli/bin/raw-loader.mjs', import.meta.url);
await import('./pipeline-stage.ts');
