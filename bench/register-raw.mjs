// For `node --import tsx --import ./bench/register-raw.mjs bench/<script>.ts`: WGSL files import
// as text through the CLI's loader, as in apps/cli/bin/shoal.mjs. Registered after tsx, so it
// runs first for `?raw` URLs.
import { register } from 'node:module';

register('../apps/cli/bin/raw-loader.mjs', import.meta.url);
