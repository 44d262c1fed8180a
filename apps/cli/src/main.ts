import { fileTileCache, setDefaultTileCache } from '@shoal/gpu';
import { createProgram } from './program.ts';

// The matmul tile search's choices kept in a file, per adapter and shape class: searched once per
// machine, not once per run (docs/matmul.md).
setDefaultTileCache(fileTileCache());
await createProgram().parseAsync(process.argv);
