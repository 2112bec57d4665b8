// npm run build (and npm ci, through `prepare`): dist/ becomes a self-contained production directory.
//
//   dist/src/           the service compiled to JavaScript, with source maps, and the non-TypeScript
//                       files of src/ (the pages' CSS and scripts)
//   dist/package.json   the project's package.json with scripts that run the compiled service, and
//                       no build step
//   dist/package-lock.json
//
// Install it anywhere with `npm ci --omit=dev`, then `npm start` (README, "Production install").
// `--out <dir>` builds into another directory instead of dist/ (the packaging tests build from the
// current sources into a temporary directory).
import { spawnSync } from 'node:child_process';
import { cpSync, globSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = join(import.meta.dirname, '..');
const { values } = parseArgs({ options: { out: { type: 'string' } } });
const DIST = values.out ? resolve(values.out) : join(ROOT, 'dist');

interface PackageJson {
  scripts: Record<string, string>;
  [field: string]: unknown;
}

/** The Node flags of the project's `npm start`: the production scripts run with the same ones. */
function startFlags(pkg: PackageJson): string {
  const match = /^node((?: --[\w-]+(?:=\S+)?)*) dist\/src\/main\.js serve$/.exec(pkg.scripts.start ?? '');
  if (!match) throw new Error(`package.json: unexpected start script: ${pkg.scripts.start}`);
  return match[1]!.trim();
}

/** The production package.json: the project's, with scripts that run dist/src and no build step. */
function productionPackage(pkg: PackageJson): PackageJson {
  return {
    ...pkg,
    scripts: {
      start: `node ${startFlags(pkg)} src/main.js serve`,
      idp: 'node --enable-source-maps src/main.js',
    },
  };
}

function compile(): void {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(DIST, 'src')];
  const run = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`tsc failed (exit ${run.status})`);
}

function copyAssets(): number {
  const assets = globSync('**/*', { cwd: join(ROOT, 'src'), withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
  for (const from of assets) {
    const to = join(DIST, 'src', from.slice(join(ROOT, 'src').length + 1));
    mkdirSync(dirname(to), { recursive: true });
    cpSync(from, to);
  }
  return assets.length;
}

const started = performance.now();
// Only what a build writes: a node_modules installed there by `npm ci --omit=dev` stays.
for (const output of ['src', 'package.json', 'package-lock.json'])
  rmSync(join(DIST, output), { recursive: true, force: true });
compile();
const assets = copyAssets();
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
writeFileSync(join(DIST, 'package.json'), `${JSON.stringify(productionPackage(pkg), null, 2)}\n`);
cpSync(join(ROOT, 'package-lock.json'), join(DIST, 'package-lock.json'));
const files = globSync('src/**/*.js', { cwd: DIST }).length;
console.log(
  `built ${DIST}: ${files} JavaScript files with source maps, ${assets} assets, package.json and package-lock.json ` +
    `(${Math.round(performance.now() - started)} ms)`,
);
