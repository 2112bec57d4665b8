// deploy/systemd/passkey-idp.service: `systemd-analyze verify` finds nothing wrong with it, it has the
// hardening docs/deploy-systemd.md promises, and it runs exactly what `npm start` runs in the
// production directory. verify insists that ExecStart's program exists, so it checks a copy whose
// program is the Node.js that runs this test; every other line is the unit's own.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './helpers.ts';

const UNIT = join(ROOT, 'deploy', 'systemd', 'passkey-idp.service');
const INSTALLED_NODE = '/opt/passkey-idp/node_modules/.bin/node';
const text = readFileSync(UNIT, 'utf8');

/** The unit's settings: section -> key -> values (a key may repeat). */
function parseUnit(source: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const line of source.split('\n')) {
    if (!line.trim() || /^[#;]/.test(line)) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const eq = line.indexOf('=');
    assert.ok(current && eq > 0, `not a unit line: ${line}`);
    const key = line.slice(0, eq);
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1)]);
  }
  return sections;
}

const service = parseUnit(text).get('Service')!;
const one = (key: string) => {
  const values = service.get(key);
  assert.ok(values, `[Service] sets ${key}`);
  return values.at(-1)!;
};

const systemdAnalyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const missing = systemdAnalyze.error !== undefined;
if (missing && process.env.CI === 'true')
  throw new Error('systemd-analyze is missing: .ci/run installs the systemd package');

describe('systemd unit deploy/systemd/passkey-idp.service', () => {
  it(
    'passes systemd-analyze verify with no error or warning',
    { skip: missing ? 'systemd-analyze is not installed (Debian package systemd; .ci/run installs it)' : false },
    () => {
      assert.ok(text.includes(`ExecStart=${INSTALLED_NODE} `));
      const dir = mkdtempSync(join(tmpdir(), 'idp-systemd-'));
      try {
        const copy = join(dir, 'passkey-idp.service');
        writeFileSync(copy, text.replace(`ExecStart=${INSTALLED_NODE} `, `ExecStart=${process.execPath} `));
        const verify = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8' });
        const output = `${verify.stdout}${verify.stderr}`;
        // verify also loads the units this one names (network-online.target, ...): only lines about
        // this unit are its problems.
        const problems = output.split('\n').filter((line) => line.includes('passkey-idp.service'));
        assert.deepEqual(problems, [], output);
        assert.equal(verify.status, 0, output);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('runs the compiled service as npm start does in the production directory', () => {
    const start = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start as string;
    const flags = /^node (.*) dist\/src\/main\.js serve$/.exec(start)![1];
    assert.equal(one('ExecStart'), `${INSTALLED_NODE} ${flags} src/main.js serve`);
    assert.equal(one('WorkingDirectory'), '/opt/passkey-idp');
    assert.equal(one('Restart'), 'on-failure');
    assert.match(one('EnvironmentFile'), /^\/etc\/passkey-idp\/.+\.env$/);
    assert.match(one('Environment'), /\bDATA_DIR=\/var\/lib\/passkey-idp\b/);
    assert.equal(one('StateDirectory'), 'passkey-idp');
  });

  it('runs as a dedicated user, hardened', () => {
    assert.equal(one('User'), 'passkey-idp');
    assert.equal(one('Group'), 'passkey-idp');
    const expected: Record<string, string> = {
      NoNewPrivileges: 'yes',
      CapabilityBoundingSet: '',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      PrivateDevices: 'yes',
      ProtectKernelTunables: 'yes',
      ProtectKernelModules: 'yes',
      ProtectKernelLogs: 'yes',
      ProtectControlGroups: 'yes',
      RestrictAddressFamilies: 'AF_UNIX AF_INET AF_INET6',
      RestrictNamespaces: 'yes',
      LockPersonality: 'yes',
      SystemCallFilter: '@system-service',
      MemoryDenyWriteExecute: 'no',
    };
    for (const [key, value] of Object.entries(expected)) assert.equal(one(key), value, key);
  });

  // What systemd's MemoryDenyWriteExecute=yes does on Linux 6.3 and later: prctl(PR_SET_MDWE,
  // PR_MDWE_REFUSE_EXEC_GAIN), inherited across exec. Python's ctypes makes the call, then runs Node.
  const mdwe = (nodeArgs: string[]) =>
    spawnSync(
      'python3',
      [
        '-c',
        [
          'import ctypes, os, sys',
          'libc = ctypes.CDLL(None, use_errno=True)',
          'if libc.prctl(65, 1, 0, 0, 0) != 0: sys.exit(77)',
          'os.execv(sys.argv[1], sys.argv[1:])',
        ].join('\n'),
        process.execPath,
        ...nodeArgs,
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
  const probe = mdwe(['-e', '0']);
  const noMdwe = probe.error !== undefined || probe.status === 77;

  it(
    'MemoryDenyWriteExecute stays off: Node.js cannot start under it',
    { skip: noMdwe ? 'this kernel (or python3) cannot set PR_SET_MDWE' : false },
    () => {
      const jit = mdwe(['-e', 'console.log("started")']);
      assert.notEqual(jit.status, 0, 'Node.js started under MemoryDenyWriteExecute: the unit could turn it on');
      assert.doesNotMatch(jit.stdout, /started/);
      // The same process without the restriction starts: it is the restriction that stops it.
      const plain = spawnSync(process.execPath, ['-e', 'console.log("started")'], { encoding: 'utf8' });
      assert.equal(plain.stdout.trim(), 'started');
    },
  );
});
