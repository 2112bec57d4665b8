// Installing and running the service the way an operator does, outside this checkout: npm from the
// machine, the npm cache reused (installs take seconds, not minutes), nothing of the checkout's
// node_modules on the PATH.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');

/** The environment of an operator's shell: no npm variables of the test run, the checkout's tools off the PATH. */
export function operatorEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^npm_/i.test(name)) continue;
    if (['DATABASE_URL', 'IDP_SECRET', 'TEST_POSTGRES_URL', 'NODE_OPTIONS'].includes(name)) continue;
    env[name] = value;
  }
  env.PATH = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir && !dir.startsWith(join(ROOT, 'node_modules')))
    .join(delimiter);
  // What is already in the npm cache is not downloaded again; the rest comes from the registry.
  env.npm_config_prefer_offline = 'true';
  env.npm_config_update_notifier = 'false';
  return { ...env, ...extra };
}

/** Runs a command to completion; fails the test with its output when it exits non-zero. */
export function run(command: string, args: string[], cwd: string, env = operatorEnv(), input?: string): string {
  const result = spawnSync(command, args, { cwd, env, input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(
    result.status,
    0,
    `${command} ${args.join(' ')} (in ${cwd}) exited ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`,
  );
  return result.stdout;
}

export interface Running {
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts a long-running command in its own process group and waits until url/readyz answers 200. */
export async function startAndWait(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
  url: string,
): Promise<Running> {
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running: Running = {
    child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          // The group: npm start passes SIGTERM on, but the service must stop even if it did not.
          process.kill(-child.pid!, 'SIGTERM');
        } catch {
          // already gone
        }
      }
      await exited;
    },
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) assert.fail(`${command} ${args.join(' ')} exited (${child.exitCode}): ${stderr}`);
    if (i === 600) {
      await running.stop();
      assert.fail(`${command} ${args.join(' ')}: ${url}/readyz did not answer 200 within 60 s: ${stderr}`);
    }
    const status = await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return running;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The process ids below pid, from /proc. */
export function descendants(pid: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      byParent.set(ppid, [...(byParent.get(ppid) ?? []), Number(entry)]);
    } catch {
      // ended meanwhile
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const child of byParent.get(parent) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/** The command lines (argv) of a process and everything below it. */
export function commandLines(pid: number): string[][] {
  return [pid, ...descendants(pid)].flatMap((p) => {
    try {
      return [readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').filter(Boolean)];
    } catch {
      return [];
    }
  });
}
