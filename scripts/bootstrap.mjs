#!/usr/bin/env node
// Sets up a fresh machine for `npm start` and `npm test`. Dependency-free on purpose: it runs
// before anything is installed.
//
//   node scripts/bootstrap.mjs [--web] [--system]
//
//   (always)  Node version check; `npm ci` / `npm install` when node_modules is missing or stale.
//   --web     builds the web app into dist/web when it is missing or older than its sources.
//   --system  the system pieces the tests need: Debian's chromium (e2e tests, SwiftShader) and
//             Mesa's lavapipe from bookworm-backports (faster software WebGPU in Node). Installed
//             with apt-get when root; otherwise it stops with the exact command to run.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_CANDIDATES, chromiumPath } from './chromium.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const args = new Set(process.argv.slice(2));
const log = (message) => console.log(`[shoal] ${message}`);

function fail(message) {
  console.error(`[shoal] ${message}`);
  process.exit(1);
}

function run(command, commandArgs, options = {}) {
  log(`$ ${command} ${commandArgs.join(' ')}`);
  const result = spawnSync(command, commandArgs, { cwd: root, stdio: 'inherit', ...options });
  if (result.error) fail(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} ${commandArgs.join(' ')} failed with exit code ${result.status}`);
}

// --- Node -----------------------------------------------------------------------------------
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  fail(`Node ${process.versions.node} is too old: Shoal needs Node 20.19 or newer (https://nodejs.org).`);
}

// --- npm dependencies -------------------------------------------------------------------------
function workspaceManifests() {
  const manifests = ['package.json', 'package-lock.json'];
  for (const group of ['apps', 'packages']) {
    const dir = join(root, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const manifest = join(group, name, 'package.json');
      if (existsSync(join(root, manifest))) manifests.push(manifest);
    }
  }
  return manifests;
}

function dependencyStamp() {
  const hash = createHash('sha256');
  for (const file of workspaceManifests()) {
    if (existsSync(join(root, file))) hash.update(file).update(readFileSync(join(root, file)));
  }
  return hash.digest('hex');
}

const stampFile = join(root, 'node_modules', '.shoal-install-stamp');
const stamp = dependencyStamp();
const installed = existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp;
if (!installed) {
  const env = { ...process.env, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' };
  const fresh = !existsSync(join(root, 'node_modules'));
  // A fresh clone installs exactly the lockfile; a working copy whose manifests changed updates it.
  const useCi = existsSync(join(root, 'package-lock.json')) && (fresh || process.env.CI);
  run('npm', useCi ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund'], { env });
  writeFileSync(stampFile, dependencyStamp());
} else {
  log('dependencies are installed');
}

// --- system packages ------------------------------------------------------------------------
function debianCodename() {
  try {
    return /^VERSION_CODENAME=(.*)$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? null;
  } catch {
    return null;
  }
}

function packageVersion(name) {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
  const result = spawnSync('dpkg-query', ['-W', '-f=${Version}', name], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : null;
}

const LAVAPIPE_ICD = '/usr/share/vulkan/icd.d/lvp_icd.json';

/** lavapipe works with Dawn from Mesa 24 on; bookworm's own Mesa (22.3) is too old. */
function lavapipeUsable() {
  if (!existsSync(LAVAPIPE_ICD)) return false;
  const version = packageVersion('mesa-vulkan-drivers');
  return version === null || Number.parseInt(version, 10) >= 24;
}

if (args.has('--system')) {
  const missing = [];
  const browser = chromiumPath();
  if (process.env.CHROMIUM && !existsSync(process.env.CHROMIUM)) {
    fail(`CHROMIUM=${process.env.CHROMIUM} does not exist: point it at a Chromium or Chrome binary, or unset it.`);
  }
  if (!browser || !existsSync(browser)) missing.push('chromium');
  if (!lavapipeUsable()) missing.push('lavapipe');

  if (missing.length === 0) {
    log(`system packages are present (Chromium at ${browser}, lavapipe)`);
  } else {
    const codename = debianCodename();
    const hasApt = existsSync('/usr/bin/apt-get');
    // bookworm's own Mesa (22.3) is too old for Dawn; its backports carry Mesa 25.
    const backports = codename === 'bookworm' && missing.includes('lavapipe');
    const commands = [];
    if (backports) {
      commands.push(
        `echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/shoal-backports.list`,
      );
    }
    commands.push('apt-get update');
    if (missing.includes('chromium')) commands.push('apt-get install -y chromium');
    if (missing.includes('lavapipe')) {
      commands.push(`apt-get install -y ${backports ? '-t bookworm-backports ' : ''}mesa-vulkan-drivers`);
    }
    const isRoot = process.getuid?.() === 0;
    if (!hasApt) {
      fail(
        `missing: ${missing.join(', ')}. This is not a Debian system: install Chromium (or set CHROMIUM=/path/to/chrome; ` +
          `looked in ${CHROMIUM_CANDIDATES.join(', ')}) and Mesa's Vulkan drivers (lavapipe, Mesa 24 or newer).`,
      );
    }
    if (!isRoot) {
      fail(
        `missing: ${missing.join(', ')}. Run as root, then npm test again:\n` +
          commands.map((c) => `  sudo sh -c "${c.replaceAll('"', '\\"')}"`).join('\n'),
      );
    }
    log(`installing ${missing.join(' and ')} with apt-get`);
    const hasBackportsSource = () => {
      const result = spawnSync('sh', [
        '-c',
        'grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/',
      ]);
      return result.status === 0;
    };
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    if (backports && !hasBackportsSource()) {
      writeFileSync(
        '/etc/apt/sources.list.d/shoal-backports.list',
        'deb http://deb.debian.org/debian bookworm-backports main\n',
      );
    }
    run('apt-get', ['update', '-q'], { env });
    if (missing.includes('chromium')) run('apt-get', ['install', '-y', '-q', 'chromium'], { env });
    if (missing.includes('lavapipe')) {
      run(
        'apt-get',
        ['install', '-y', '-q', ...(backports ? ['-t', 'bookworm-backports'] : []), 'mesa-vulkan-drivers'],
        {
          env,
        },
      );
    }
    if (!lavapipeUsable()) log('lavapipe is still not usable; WebGPU in Node will use SwiftShader (slower)');
  }
}

// --- web app --------------------------------------------------------------------------------
function newestMtime(path) {
  if (!existsSync(path)) return 0;
  const stats = statSync(path);
  if (!stats.isDirectory()) return stats.mtimeMs;
  let newest = stats.mtimeMs;
  for (const name of readdirSync(path)) {
    if (name === 'node_modules' || name === 'dist') continue;
    newest = Math.max(newest, newestMtime(join(path, name)));
  }
  return newest;
}

if (args.has('--web')) {
  const builtIndex = join(root, 'dist', 'web', 'index.html');
  const builtAt = existsSync(builtIndex) ? statSync(builtIndex).mtimeMs : 0;
  const sources = ['apps/web', 'packages', 'public', 'vite.config.ts', 'package-lock.json'];
  const sourcesAt = Math.max(...sources.map((source) => newestMtime(join(root, source))));
  if (sourcesAt > builtAt) {
    run(process.execPath, [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--logLevel', 'warn']);
    log('built the web app into dist/web');
  } else {
    log('the web app is up to date (dist/web)');
  }
}
