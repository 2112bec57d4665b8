// Debian's Apache in a throwaway ServerRoot (no system configuration touched), in the foreground on
// 127.0.0.1, for the tests of relying parties and resource servers that are not ours.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const APACHE = process.env.APACHE_PATH || '/usr/sbin/apache2';
export const MODULES = '/usr/lib/apache2/modules';

export interface Apache {
  url: string;
  log(): string;
  stop(): Promise<void>;
}

/**
 * The reason to skip a test that needs Apache with these modules (by file name, `mod_oauth2.so`),
 * or false when all are here. Under CI=true a missing one is an error: CI installs them (.ci/run).
 */
export function apacheMissing(modules: string[], packages: string): string | false {
  const missing = [APACHE, ...modules.map((m) => join(MODULES, m))].filter((file) => !existsSync(file));
  const skip = missing.length ? `${packages} are needed (.ci/run installs them); missing ${missing.join(', ')}` : false;
  if (skip && process.env.CI === 'true') throw new Error(skip);
  return skip;
}

function apacheConfig(dir: string, port: number, modules: string[], logLevel: string, site: string): string {
  return [
    `ServerRoot ${dir}`,
    `ServerName 127.0.0.1`,
    `Listen 127.0.0.1:${port}`,
    `PidFile ${dir}/httpd.pid`,
    `DefaultRuntimeDir ${dir}`,
    `ErrorLog ${dir}/error.log`,
    `LogLevel ${logLevel}`,
    ...modules.map((m) => `LoadModule ${m}_module ${MODULES}/mod_${m}.so`),
    // Started as root, Apache's workers must run as someone else.
    ...(process.getuid?.() === 0 ? ['User www-data', 'Group www-data'] : []),
    site,
    '',
  ].join('\n');
}

/** Apache on 127.0.0.1:<port> with the given modules (`proxy_http` for mod_proxy_http.so) and site configuration. */
export async function startApache(
  port: number,
  site: string,
  { modules, logLevel = 'warn' }: { modules: string[]; logLevel?: string },
): Promise<Apache> {
  const dir = mkdtempSync(join(tmpdir(), 'idp-apache-'));
  const url = `http://127.0.0.1:${port}`;
  writeFileSync(join(dir, 'httpd.conf'), apacheConfig(dir, port, modules, logLevel, site));
  const child: ChildProcess = spawn(APACHE, ['-d', dir, '-f', join(dir, 'httpd.conf'), '-DFOREGROUND'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const log = () => {
    const file = join(dir, 'error.log');
    return `${output}${existsSync(file) ? readFileSync(file, 'utf8') : ''}`;
  };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) {
      const text = log();
      await stop();
      assert.fail(`apache exited (${child.exitCode}):\n${text}`);
    }
    if (i === 100) {
      const text = log();
      await stop();
      assert.fail(`apache did not answer on ${url}:\n${text}`);
    }
    const up = await fetch(`${url}/`).then(
      () => true,
      () => false,
    );
    if (up) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, log, stop };
}
