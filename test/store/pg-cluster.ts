// A PostgreSQL server of the test's own (initdb and pg_ctl from Debian's PostgreSQL, run as the
// postgres user, on a free loopback port, in a temporary directory), for tests that stop, restart
// or freeze the database under a running service. Never the machine's cluster.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pickFreePort } from '../helpers.ts';

export interface Cluster {
  url: string;
  stop(mode?: 'fast' | 'immediate'): void;
  start(): void;
  /** SIGSTOP (true) or SIGCONT (false) to the server and every backend: a server that stops answering */
  freeze(frozen: boolean): void;
  destroy(): void;
}

function bin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const version = readdirSync(base).sort().at(-1);
  return version ? join(base, version, 'bin') : undefined;
}

/** Why a cluster of the test's own cannot run here, or undefined when it can. */
export function clusterUnavailable(): string | undefined {
  if (!bin()) return 'PostgreSQL server binaries (/usr/lib/postgresql/*/bin) not installed';
  if (process.getuid?.() !== 0) return 'initdb must run as the postgres user: the test needs root to switch to it';
  if (spawnSync('id', ['postgres']).status !== 0) return 'no postgres user';
  return undefined;
}

export async function startCluster(): Promise<Cluster> {
  const pgbin = bin()!;
  const dir = mkdtempSync(join(tmpdir(), 'idp-pg-'));
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const port = await pickFreePort();
  const asPostgres = (cmd: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', join(pgbin, cmd), ...args], { stdio: 'pipe', timeout: 60_000 });
  asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=60`;
  const start = () =>
    asPostgres('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
  start();
  const postmaster = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const freeze = (frozen: boolean) => {
    const pid = postmaster();
    const signal = frozen ? '-STOP' : '-CONT';
    spawnSync('pkill', [signal, '-P', String(pid)]);
    spawnSync('kill', [signal, String(pid)]);
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: (mode = 'fast') => asPostgres('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']),
    start,
    freeze,
    destroy() {
      try {
        freeze(false);
        asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
