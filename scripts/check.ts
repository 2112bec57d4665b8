// npm run check: the static checks, in two lanes at once (ESLint's type-aware rules build a program
// of their own and take longest; tsc and the quicker checks run beside it). Each check's output is
// printed when it ends, and the run fails when any check failed.
//
//   node scripts/check.ts
import { spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);

type Check = [name: string, command: string, ...args: string[]];
const lanes: Check[][] = [
  [['eslint', bin('eslint'), '.']],
  [
    ['tsc', bin('tsc'), '--noEmit', '-p', '.'],
    ['prettier', bin('prettier'), '--check', '.'],
    ['dependency-cruiser', bin('depcruise'), 'src'],
    ['Dockerfile', process.execPath, 'scripts/lint-dockerfile.ts'],
    ['OpenAPI', process.execPath, 'scripts/openapi.ts'],
  ],
];

function run([name, command, ...args]: Check): Promise<boolean> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
    let reported = false;
    const done = (ok: boolean, why: string) => {
      if (reported) return; // 'error' and 'close' may both come
      reported = true;
      const text = Buffer.concat(output).toString();
      process.stdout.write(`# ${name}: ${why} (${((Date.now() - started) / 1000).toFixed(1)} s)\n${text}`);
      if (text && !text.endsWith('\n')) process.stdout.write('\n');
      resolve(ok);
    };
    child.on('error', (err) => done(false, `could not start: ${err.message}`));
    child.on('close', (code, signal) => done(code === 0, code === 0 ? 'ok' : `failed (${signal ?? `exit ${code}`})`));
  });
}

const results = await Promise.all(
  lanes.map(async (lane) => {
    const passed: boolean[] = [];
    for (const check of lane) passed.push(await run(check));
    return passed;
  }),
);
if (results.flat().includes(false)) {
  console.error('npm run check: a check failed (above)');
  process.exit(1);
}
