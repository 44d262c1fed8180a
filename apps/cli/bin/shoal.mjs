#!/usr/bin/env node
// The `shoal` command. TypeScript runs directly through tsx (no build step); WGSL files are
// imported as text through raw-loader.mjs, as Vite does with `?raw`.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
// Registered after tsx, so it runs first for `?raw` URLs.
register('./raw-loader.mjs', import.meta.url);
await import('../src/main.ts');
