// Start-up figures of the service: time from spawning the start command until /readyz answers 200,
// and the resident memory (VmRSS) of the service process at rest afterwards.
//
//   node scripts/startup-figures.ts [--runs N] [--cwd DIR] [-- command ...]   (default command: npm start)
//
// Each run uses a fresh temporary DATA_DIR (SQLite) and a free port. Linux only (/proc).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    cwd: { type: 'string' },
    rest: { type: 'string', default: '2000' },
  },
  allowPositionals: true,
});
const command = positionals.length ? positionals : ['npm', 'start'];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The process ids below pid (npm start runs the service as a grandchild). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent pid is the second field after the parenthesised command name.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // the process ended meanwhile
    }
  }
  const all: number[] = [];
  const walk = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      all.push(child);
      walk(child);
    }
  };
  walk(pid);
  return all;
}

function rssKiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return line ? Number(line[1]) : 0;
}

/** The service: the process in the tree whose command line says serve (or the largest one). */
function serviceRss(root: number): number {
  const pids = [root, ...descendants(root)];
  const serving = pids.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('serve');
    } catch {
      return false;
    }
  });
  return Math.max(...(serving.length ? serving : pids).map(rssKiB));
}

async function once(): Promise<{ readyMs: number; rssMiB: number }> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'idp-startup-'));
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL;
  delete env.IDP_SECRET;
  const started = performance.now();
  const child = spawn(command[0]!, command.slice(1), { cwd: values.cwd, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited with ${child.exitCode}`);
      if (performance.now() - started > 30_000) throw new Error('not ready within 30 s');
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const readyMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, Number(values.rest)));
    return { readyMs, rssMiB: serviceRss(child.pid!) / 1024 };
  } finally {
    // SIGTERM to the whole group: npm passes it on, the service shuts down gracefully.
    for (const pid of [...descendants(child.pid!), child.pid!]) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const runs = Number(values.runs);
const results = [];
for (let i = 0; i < runs; i++) {
  const r = await once();
  results.push(r);
  console.log(`run ${i + 1}: ready after ${r.readyMs.toFixed(0)} ms, RSS at rest ${r.rssMiB.toFixed(1)} MiB`);
}
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `median of ${runs}: ready after ${median(results.map((r) => r.readyMs)).toFixed(0)} ms, ` +
    `RSS at rest ${median(results.map((r) => r.rssMiB)).toFixed(1)} MiB (${command.join(' ')})`,
);
