/**
 * `npm run bench:device`: prepares .device/, a self-contained folder to carry to a GPU machine
 * that has python3 with PyTorch (CUDA) but no Node and no package registry (docs/device-bench.md):
 *
 *   bin/node.xz                                 this machine's Node binary (process.execPath)
 *   node_modules/webgpu/…/linux-x64/dawn.node.xz the `webgpu` package's Dawn build, beside its index.js
 *   device.mjs                                  bench/device/main.ts and everything it imports, bundled
 *   torch_step.py                               the PyTorch side (beside device.mjs, where torch-child looks)
 *   moby-dick.txt                               the training corpus of the precision part (beside device.mjs)
 *   debs/*.deb                                  Debian's Vulkan loader and GL/EGL dispatch libraries (amd64)
 *   run.sh                                      unpacks all that there and runs the parts (bench/device/run.sh)
 *   manifest.json                               what was built from which commit, and the sizes
 *
 *   npm run bench:device -- [--out .device] [--no-debs] [--no-compress] [--xz-level 6]
 *
 * --no-debs skips apt-get (no network); --no-compress stores Node and Dawn as they are (fast, for
 * the smoke test; too large to carry). Compressed binaries are cached in node_modules/.cache.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, type Plugin } from 'esbuild';
import { writeMobyDickText } from '../../packages/data/src/corpus.node.ts';
import { CORPUS_FILE } from './output.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MIB = 1024 * 1024;
/** The folder travels with the repo's working tree in one 64 MiB transfer. */
export const KIT_LIMIT_MIB = 55;
/** Debian's packages the GPU machine lacks: the Vulkan loader, and GL/EGL dispatch (libglvnd). */
export const DEBS = ['libvulkan1', 'libegl1', 'libglvnd0', 'libopengl0', 'libgl1', 'libglx0', 'libgles2'];

export interface KitOptions {
  out: string;
  debs: boolean;
  compress: boolean;
  xzLevel: number;
  log?: (line: string) => void;
}

export interface KitManifest {
  builtAt: string;
  commit: string;
  dirty: boolean;
  node: string;
  webgpu: string;
  compressed: boolean;
  debs: string[];
  files: Record<string, number>;
  bytes: number;
}

/** `?raw` imports (WGSL) as text, as Vite and apps/cli/bin/raw-loader.mjs do. */
const rawText: Plugin = {
  name: 'raw-text',
  setup(b) {
    b.onResolve({ filter: /\?raw$/ }, (args) => ({
      path: resolve(args.resolveDir, args.path.slice(0, -'?raw'.length)),
      namespace: 'raw-text',
    }));
    b.onLoad({ filter: /.*/, namespace: 'raw-text' }, (args) => ({
      contents: readFileSync(args.path, 'utf8'),
      loader: 'text',
      watchFiles: [args.path],
    }));
  },
};

async function bundle(out: string): Promise<void> {
  await build({
    entryPoints: [join(ROOT, 'bench/device/main.ts')],
    outfile: join(out, 'device.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Loaded from node_modules/webgpu beside the bundle, so its index.js finds dist/linux-x64/dawn.node.
    external: ['webgpu'],
    plugins: [rawText],
    // CommonJS dependencies inside an ESM bundle may call require().
    banner: {
      js: "import { createRequire as shoalCreateRequire } from 'node:module'; const require = shoalCreateRequire(import.meta.url);",
    },
    logLevel: 'warning',
    legalComments: 'none',
  });
}

/** `source` xz-compressed to `target`, through a cache keyed by the source's size and time. */
function compressCached(source: string, target: string, level: number, log: (line: string) => void): void {
  const { size, mtimeMs } = statSync(source);
  const cacheDir = join(ROOT, 'node_modules/.cache/shoal-device');
  const cached = join(cacheDir, `${source.replace(/[^A-Za-z0-9]+/g, '_')}-${size}-${Math.round(mtimeMs)}-${level}.xz`);
  if (!existsSync(cached)) {
    log(`compressing ${source} (${(size / MIB).toFixed(1)} MiB, xz -${level}; cached afterwards)`);
    mkdirSync(cacheDir, { recursive: true });
    const result = spawnSync(
      'sh',
      ['-c', `xz -T0 -${level} -c "$1" > "$2.part" && mv "$2.part" "$2"`, 'sh', source, cached],
      {
        stdio: 'inherit',
      },
    );
    if (result.status !== 0) throw new Error(`xz failed on ${source} (is xz-utils installed?)`);
  }
  copyFileSync(cached, target);
}

function carry(source: string, target: string, options: KitOptions, log: (line: string) => void): void {
  mkdirSync(dirname(target), { recursive: true });
  if (options.compress) compressCached(source, `${target}.xz`, options.xzLevel, log);
  else copyFileSync(source, target);
}

/** Debian's amd64 packages, fetched with apt-get into `dir` (a private package list; this machine's stays as it is). */
function downloadDebs(dir: string, log: (line: string) => void): string[] {
  mkdirSync(dir, { recursive: true });
  const lists = '/tmp/shoal-device-apt-amd64';
  mkdirSync(join(lists, 'partial'), { recursive: true });
  const apt = [
    '-oAPT::Architecture=amd64',
    '-oAPT::Architectures=amd64',
    `-oDir::State::Lists=${lists}`,
    '-oAPT::Sandbox::User=root', // the download folder is ours, not _apt's
  ];
  const have = () => readdirSync(dir).filter((f) => f.endsWith('.deb'));
  const missing = () => DEBS.filter((name) => !have().some((f) => f.startsWith(`${name}_`)));
  if (missing().length > 0) {
    log(`apt-get download ${missing().join(' ')}`);
    const update = spawnSync('apt-get', [...apt, '-qq', 'update'], { stdio: 'inherit' });
    if (update.status !== 0)
      throw new Error('apt-get update failed (no network? use --no-debs and bring the debs yourself)');
    const download = spawnSync('apt-get', [...apt, '-qq', 'download', ...missing()], { cwd: dir, stdio: 'inherit' });
    if (download.status !== 0 || missing().length > 0) {
      throw new Error(`apt-get download failed for ${missing().join(' ')} (use --no-debs to build without them)`);
    }
  }
  return have().sort();
}

function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? listFiles(path, base) : [relative(base, path)];
  });
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * MIB }).trim();
  } catch {
    return '';
  }
}

/** Bytes of the working tree that travels with the folder: tracked files, and untracked ones git does not ignore. */
export function workingTreeBytes(): { tracked: number; untracked: number } {
  const sum = (list: string) =>
    list
      .split('\0')
      .filter(Boolean)
      .reduce((total, path) => {
        try {
          const stat = statSync(join(ROOT, path));
          return total + (stat.isFile() ? stat.size : 0);
        } catch {
          return total; // deleted in the working tree
        }
      }, 0);
  return {
    tracked: sum(git(['ls-files', '-z'])),
    untracked: sum(git(['ls-files', '-z', '--others', '--exclude-standard'])),
  };
}

export async function buildKit(options: KitOptions): Promise<KitManifest> {
  const log = options.log ?? ((line: string) => console.log(line));
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(
      `the GPU machine runs linux-x64; this Node is ${process.platform}-${process.arch} and cannot be carried`,
    );
  }
  const out = resolve(options.out);
  // The debs survive a rebuild (they only change with Debian); everything else is made afresh.
  for (const entry of existsSync(out) ? readdirSync(out) : []) {
    if (entry !== 'debs') rmSync(join(out, entry), { recursive: true, force: true });
  }
  mkdirSync(out, { recursive: true });

  log('bundling bench/device/main.ts → device.mjs');
  await bundle(out);
  copyFileSync(join(ROOT, 'bench/torch_step.py'), join(out, 'torch_step.py'));
  writeMobyDickText(join(out, CORPUS_FILE));
  copyFileSync(join(ROOT, 'bench/device/run.sh'), join(out, 'run.sh'));
  chmodSync(join(out, 'run.sh'), 0o755);

  const webgpu = join(ROOT, 'node_modules/webgpu');
  const webgpuOut = join(out, 'node_modules/webgpu');
  mkdirSync(webgpuOut, { recursive: true });
  for (const file of ['package.json', 'index.js']) copyFileSync(join(webgpu, file), join(webgpuOut, file));
  carry(join(webgpu, 'dist/linux-x64/dawn.node'), join(webgpuOut, 'dist/linux-x64/dawn.node'), options, log);
  carry(process.execPath, join(out, 'bin/node'), options, log);

  let debs: string[] = [];
  if (options.debs) debs = downloadDebs(join(out, 'debs'), log);
  else rmSync(join(out, 'debs'), { recursive: true, force: true });

  const files = Object.fromEntries(listFiles(out).map((file) => [file, statSync(join(out, file)).size]));
  const manifest: KitManifest = {
    builtAt: new Date().toISOString(),
    commit: git(['rev-parse', 'HEAD']),
    dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '',
    node: process.version,
    webgpu: (JSON.parse(readFileSync(join(webgpu, 'package.json'), 'utf8')) as { version: string }).version,
    compressed: options.compress,
    debs,
    files,
    bytes: Object.values(files).reduce((a, b) => a + b, 0),
  };
  writeFileSync(join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      out: { type: 'string', default: join(ROOT, '.device') },
      'no-debs': { type: 'boolean', default: false },
      'no-compress': { type: 'boolean', default: false },
      'xz-level': { type: 'string', default: '6' },
    },
  });
  const xzLevel = Number(args['xz-level']);
  if (!Number.isInteger(xzLevel) || xzLevel < 0 || xzLevel > 9)
    throw new Error(`--xz-level must be 0…9, got ${args['xz-level']}`);
  const out = resolve(args.out ?? '.device');
  const manifest = await buildKit({ out, debs: !args['no-debs'], compress: !args['no-compress'], xzLevel });
  const kit = manifest.bytes / MIB;
  const tree = workingTreeBytes();
  const treeMiB = (tree.tracked + tree.untracked) / MIB;
  for (const [file, bytes] of Object.entries(manifest.files))
    console.log(`  ${(bytes / MIB).toFixed(2).padStart(7)} MiB  ${file}`);
  console.log(
    `${relative(process.cwd(), out) || out}: ${kit.toFixed(1)} MiB (limit ${KIT_LIMIT_MIB}); working tree that travels with it: ` +
      `${(tree.tracked / MIB).toFixed(1)} MiB tracked + ${(tree.untracked / MIB).toFixed(1)} MiB untracked = ` +
      `${(kit + treeMiB).toFixed(1)} MiB of the 64 MiB`,
  );
  if (!manifest.debs.length) console.log('no .debs: the GPU machine must already have libvulkan.so.1');
  console.log(
    `there: bash ${relative(ROOT, out) || '.device'}/run.sh  (carry ${relative(ROOT, out) || '.device'}; results under $OUT)`,
  );
  if (!manifest.compressed) {
    console.log(
      '--no-compress: Node and Dawn are stored as they are; this folder is for local runs, too large to carry',
    );
    return;
  }
  if (kit > KIT_LIMIT_MIB) throw new Error(`the folder is ${kit.toFixed(1)} MiB, over ${KIT_LIMIT_MIB} MiB`);
  if (kit + treeMiB > 64) throw new Error(`folder and working tree are ${(kit + treeMiB).toFixed(1)} MiB, over 64 MiB`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(`bench:device: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  });
}
