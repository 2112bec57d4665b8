// A SAML service provider that is not ours: Debian's python3-pysaml2 (Saml2Client, xmlsec1
// underneath) as a small HTTP server on 127.0.0.1 (pysaml2_sp.py), started in a temporary directory
// with its own keys and the IdP's metadata.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers.ts';
import { writeKeyPair, type KeyPair } from './keys.ts';

/** Debian's interpreter, where python3-pysaml2 is installed (not whichever python3 is first on PATH). */
export const PYTHON = process.env.SP_PYTHON || '/usr/bin/python3';
const SCRIPT = join(import.meta.dirname, 'pysaml2_sp.py');

/** The reason to skip a test that needs pysaml2, or false. Under CI=true a missing one is an error. */
export function pysaml2Missing(): string | false {
  const probe = spawnSync(PYTHON, ['-c', 'import saml2.client'], { encoding: 'utf8' });
  const xmlsec = spawnSync('/usr/bin/xmlsec1', ['--version'], { encoding: 'utf8' });
  const skip =
    probe.status === 0 && xmlsec.status === 0
      ? false
      : `python3-pysaml2 and xmlsec1 are needed (.ci/run installs them): ${probe.stderr ?? ''}${xmlsec.error?.message ?? ''}`;
  if (skip && process.env.CI === 'true') throw new Error(skip);
  return skip;
}

export interface Pysaml2Options {
  idpMetadata: string;
  /** sign AuthnRequests (and say so in the SP metadata) */
  signRequests?: boolean;
  /** publish an encryption key (default true) */
  encryption?: boolean;
  wantAssertionsSigned?: boolean;
  wantResponseSigned?: boolean;
  allowUnsolicited?: boolean;
}

/** One JSON line the SP printed: {event: 'ready' | 'login' | 'acs' | 'logout' | 'slo-response' | ..., error?} */
export type SpEvent = { event: string; error?: string } & Record<string, any>;

export interface Pysaml2Sp {
  url: string;
  entityId: string;
  metadataUrl: string;
  loginUrl: string;
  signing: KeyPair;
  encryption: KeyPair | undefined;
  events: SpEvent[];
  /** the next event of that name after the ones already seen (waits up to 10 s) */
  next(event: string): Promise<SpEvent>;
  output(): string;
  stop(): Promise<void>;
}

export async function startPysaml2(options: Pysaml2Options): Promise<Pysaml2Sp> {
  const dir = mkdtempSync(join(tmpdir(), 'idp-pysaml2-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const signing = await writeKeyPair(dir, 'sp-signing', '127.0.0.1 pysaml2');
  const encryption = options.encryption === false ? undefined : await writeKeyPair(dir, 'sp-encryption');
  const idpMetadata = join(dir, 'idp.xml');
  writeFileSync(idpMetadata, options.idpMetadata);
  const settings = {
    port,
    base: url,
    entity_id: `${url}/metadata`,
    key: signing.keyFile,
    cert: signing.certFile,
    ...(encryption ? { enc_key: encryption.keyFile, enc_cert: encryption.certFile } : {}),
    idp_metadata: idpMetadata,
    sign_requests: options.signRequests ?? false,
    want_assertions_signed: options.wantAssertionsSigned ?? true,
    want_response_signed: options.wantResponseSigned ?? false,
    allow_unsolicited: options.allowUnsolicited ?? false,
  };
  const child: ChildProcess = spawn(PYTHON, [SCRIPT, JSON.stringify(settings)], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: SpEvent[] = [];
  let output = '';
  let pending = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      output += `${line}\n`;
      try {
        events.push(JSON.parse(line) as SpEvent);
      } catch {
        // not an event line
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let seen = 0;
  const next = async (event: string, waitMs = 10_000): Promise<SpEvent> => {
    for (let i = 0; i < waitMs / 50; i++) {
      const index = events.findIndex((e, n) => n >= seen && e.event === event);
      if (index !== -1) {
        seen = index + 1;
        return events[index]!;
      }
      if (child.exitCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`pysaml2 SP printed no ${event} event:\n${output}`);
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // importing pysaml2 alone takes seconds on a busy machine
    await next('ready', 60_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    entityId: `${url}/metadata`,
    metadataUrl: `${url}/metadata`,
    loginUrl: `${url}/login`,
    signing,
    encryption,
    events,
    next,
    output: () => output,
    stop,
  };
}
