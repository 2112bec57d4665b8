// npm run build (and npm ci, through `prepare`): dist/ becomes a self-contained production directory.
//
//   dist/src/           the service bundled into JavaScript (esbuild: main.js, which switches on the
//                       compile cache and loads the rest, and chunks beside it, the lazily loaded
//                       parts in chunks of their own), with source maps of the project's TypeScript,
//                       and the non-TypeScript files of src/ (the pages' CSS and scripts)
//   dist/package.json   the project's package.json with scripts that run the compiled service, and
//                       no build step
//   dist/package-lock.json
//
// One bundle instead of a file per module: loading some 1,300 modules one by one (resolving,
// reading, linking each) was most of the time to ready. The libraries are bundled too, except sharp
// (a native addon); the production install still has every production dependency, and the files
// Swagger UI serves stay in its package. The source maps cover the project's own code, one
// mapping per line: Node parses a map when it first needs one (a library asks for the stack at
// start-up), and a full map of the libraries, megabytes of it, cost more than the bundle saved. A
// stack frame in a library shows the bundle's file and line; the bundle names each library file above
// its code.
//
// Install it anywhere with `npm ci --omit=dev`, then `npm start` (README, "Production install").
// `--out <dir>` builds into another directory instead of dist/ (the packaging tests build from the
// current sources into a temporary directory).
import { decode, encode, type SourceMapSegment } from '@jridgewell/sourcemap-codec';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import http from 'node:http';
import { cpSync, globSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
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

/** Libraries left out of the bundle, loaded from node_modules: a native addon, an optional one. */
const EXTERNAL = ['sharp', 'pg-native'];

/** Bundled libraries that read files of their own package (Swagger UI's pages and scripts). */
const READS_OWN_FILES = ['@fastify/swagger-ui'];

/**
 * A library that reads its own files finds them from __dirname: in the bundle, its module gets its
 * own __dirname, the directory it has in node_modules, found at run time.
 */
const ownDirectory: Plugin = {
  name: 'own-directory',
  setup(b) {
    for (const name of READS_OWN_FILES) {
      const root = join(ROOT, 'node_modules', name);
      b.onLoad({ filter: new RegExp(`/node_modules/${name}/.*\\.js$`) }, (args) => {
        const within = relative(root, dirname(args.path));
        const dir =
          `require('node:path').join(require('node:path').dirname(require.resolve(${JSON.stringify(`${name}/package.json`)}))` +
          `, ${JSON.stringify(within)})`;
        return { contents: `var __dirname = ${dir};\n${readFileSync(args.path, 'utf8')}`, loader: 'js' };
      });
    }
  },
};

/**
 * An ES module that imports node:http gets Node's module facade, which reads every export, the
 * WebSocket, CloseEvent and MessageEvent getters among them, and so loads undici (tens of
 * milliseconds at start-up, for classes nothing here uses). In the bundle, such imports read the
 * CommonJS module instead, with every export but those getters.
 */
const httpWithoutUndici: Plugin = {
  name: 'http-without-undici',
  setup(b) {
    const lazy = new Set(['WebSocket', 'CloseEvent', 'MessageEvent']);
    const names = Object.keys(http).filter((k) => !lazy.has(k) && /^[A-Za-z_$][\w$]*$/.test(k));
    b.onResolve({ filter: /^(node:)?http$/ }, (args) =>
      args.kind === 'import-statement' ? { path: 'node:http', namespace: 'http-without-undici' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'http-without-undici' }, () => ({
      contents: [
        "const http = require('node:http');",
        'export default http;',
        `export const { ${names.join(', ')} } = http;`,
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/**
 * Bundled CommonJS libraries use require, __filename and __dirname; an ES module has none of them.
 * (__dirname is the bundle's directory: the libraries that use it here only reach files they do not
 * need, @fastify/swagger's package.json and pino's transport workers.)
 */
const COMMONJS_GLOBALS = [
  "import { createRequire as __createRequire } from 'node:module';",
  "import { fileURLToPath as __fileURLToPath } from 'node:url';",
  'const require = __createRequire(import.meta.url);',
  'const __filename = __fileURLToPath(import.meta.url);',
  "const __dirname = __fileURLToPath(new URL('.', import.meta.url));",
].join(' ');

/** The options of both builds below. */
const OPTIONS: BuildOptions & { plugins: Plugin[] } = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  external: EXTERNAL,
  absWorkingDir: ROOT,
  logLevel: 'warning',
  plugins: [ownDirectory, httpWithoutUndici],
};

/**
 * The libraries the project's own modules import (static and dynamic imports, as written), from a
 * first build that writes nothing.
 */
async function librariesImported(): Promise<string[]> {
  const { metafile } = await build({
    ...OPTIONS,
    entryPoints: [join(ROOT, 'src', 'main.ts')],
    write: false,
    outdir: join(DIST, 'src'),
    splitting: true,
    metafile: true,
  });
  const specifiers = new Set<string>();
  for (const [path, input] of Object.entries(metafile.inputs)) {
    if (!path.startsWith('src/')) continue;
    for (const i of input.imports)
      if (i.original && !i.external && i.path.includes('node_modules/')) specifiers.add(i.original);
  }
  return [...specifiers].sort();
}

/**
 * The service, with its libraries in chunks of their own: beside the entry point, a second one that
 * only re-exports the libraries makes esbuild put the library code the service shares with it into
 * separate chunks, which get no source map. That second entry point is deleted afterwards.
 */
async function bundle(): Promise<void> {
  const libraries = await librariesImported();
  await build({
    ...OPTIONS,
    entryPoints: [
      { in: join(ROOT, 'src', 'main.ts'), out: 'main' },
      // the child process that verifies a large SAML federation aggregate (src/service-providers/aggregate-process.ts)
      { in: join(ROOT, 'src', 'service-providers', 'aggregate-worker.ts'), out: 'aggregate-worker' },
      { in: 'libraries', out: 'libraries' },
    ],
    plugins: [
      ...OPTIONS.plugins,
      {
        name: 'libraries-entry',
        setup(b) {
          b.onResolve({ filter: /^libraries$/ }, () => ({ path: 'libraries', namespace: 'libraries' }));
          b.onLoad({ filter: /.*/, namespace: 'libraries' }, () => ({
            contents: libraries.map((l, i) => `export * as l${i} from ${JSON.stringify(l)};`).join('\n'),
            resolveDir: ROOT,
          }));
        },
      },
    ],
    outdir: join(DIST, 'src'),
    splitting: true,
    chunkNames: '[name]-[hash]',
    banner: { js: COMMONJS_GLOBALS },
    sourcemap: 'linked',
    sourcesContent: false,
  });
  for (const file of ['libraries.js', 'libraries.js.map']) rmSync(join(DIST, 'src', file));
}

/**
 * Keeps a map's mappings into the project's sources, the first of each source line only: what a
 * stack trace needs (file and line), at a fraction of the size. The sources are named as from the
 * checkout's dist/src (`../../src/app.ts`) wherever the build is written. A chunk of library code
 * alone loses its map and the comment that points to it.
 */
function trimSourceMap(path: string): void {
  const map = JSON.parse(readFileSync(path, 'utf8')) as { sources: string[]; mappings: string };
  const renumbered = new Map<number, number>();
  const sources: string[] = [];
  map.sources.forEach((source, i) => {
    const file = resolve(dirname(path), source);
    if (!file.startsWith(join(ROOT, 'src', '/'))) return;
    renumbered.set(i, sources.length);
    // as seen from the checkout's dist/src, wherever this build is written: ../../src/app.ts
    sources.push(relative(join(ROOT, 'dist', 'src'), file));
  });
  if (sources.length === 0) {
    const code = path.slice(0, -'.map'.length);
    writeFileSync(code, readFileSync(code, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\n$/, '\n'));
    rmSync(path);
    return;
  }
  const lines = decode(map.mappings).map((line) => {
    const kept: SourceMapSegment[] = [];
    for (const segment of line) {
      if (segment.length === 1) continue;
      const source = renumbered.get(segment[1]);
      if (source === undefined) continue;
      const last = kept.at(-1);
      if (last && last.length > 1 && last[1] === source && last[2] === segment[2]) continue;
      kept.push([segment[0], source, segment[2], segment[3]]);
    }
    return kept;
  });
  writeFileSync(path, JSON.stringify({ ...map, sources, names: [], mappings: encode(lines) }));
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
await bundle();
for (const map of globSync('src/*.js.map', { cwd: DIST })) trimSourceMap(join(DIST, map));
const assets = copyAssets();
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
writeFileSync(join(DIST, 'package.json'), `${JSON.stringify(productionPackage(pkg), null, 2)}\n`);
cpSync(join(ROOT, 'package-lock.json'), join(DIST, 'package-lock.json'));
const files = globSync('src/*.js', { cwd: DIST }).length;
console.log(
  `built ${DIST}: ${files} bundled JavaScript files with source maps, ${assets} assets, package.json and package-lock.json ` +
    `(${Math.round(performance.now() - started)} ms)`,
);
