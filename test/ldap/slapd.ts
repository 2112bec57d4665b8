// A real OpenLDAP server for the LDAP tests: Debian's slapd started on a free loopback port with
// its own slapd.conf, schema copies and mdb database in a temp dir (never the system's /etc/ldap),
// loaded with slapadd. Its users can carry an Active Directory-like auxiliary class (test schema:
// userAccountControl, a binary objectGUID, userPrincipalName, sAMAccountName) so the code paths for
// Active Directory run against it, and Active Directory's group class (`group` with a binary
// objectGUID and member DNs). Its log (loglevel stats) shows every BIND the server received.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pickFreePort } from '../helpers.ts';

export const SUFFIX = 'dc=example,dc=org';
export const ADMIN_DN = `cn=admin,${SUFFIX}`;
export const ADMIN_PASSWORD = 'admin-secret';
export const SERVICE_DN = `cn=idp,ou=services,${SUFFIX}`;
export const SERVICE_PASSWORD = 'service-secret-1';
export const PEOPLE = `ou=people,${SUFFIX}`;

const SCHEMAS = ['core', 'cosine', 'inetorgperson', 'nis'];

/** The Active Directory attributes this test server knows (OpenLDAP's experimental OID arc). */
const AD_SCHEMA = `
attributetype ( 1.3.6.1.4.1.4203.666.11.90.1 NAME 'userAccountControl'
  EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )
attributetype ( 1.3.6.1.4.1.4203.666.11.90.2 NAME 'objectGUID'
  EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 SINGLE-VALUE )
attributetype ( 1.3.6.1.4.1.4203.666.11.90.3 NAME 'userPrincipalName'
  EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( 1.3.6.1.4.1.4203.666.11.90.4 NAME 'sAMAccountName'
  EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
objectclass ( 1.3.6.1.4.1.4203.666.11.90.10 NAME 'adTestUser' AUXILIARY
  MAY ( userAccountControl $ objectGUID $ userPrincipalName $ sAMAccountName ) )
objectclass ( 1.3.6.1.4.1.4203.666.11.90.11 NAME 'group' SUP top STRUCTURAL
  MUST cn MAY ( member $ objectGUID $ displayName $ description ) )
`;

export interface TestUser {
  uid: string;
  given: string;
  family: string;
  mail: string;
  password: string;
  affiliation: string;
  /** Active Directory-like entries only */
  guid?: Buffer;
  disabled?: boolean;
}

export function testUsers(count: number, ad = false): TestUser[] {
  return Array.from({ length: count }, (_, i) => {
    const n = String(i + 1).padStart(5, '0');
    return {
      uid: `user${n}`,
      given: `Given${n}`,
      family: `Family${n}`,
      mail: `user${n}@example.org`,
      password: `pw-user${n}`,
      affiliation: i % 3 === 0 ? 'staff' : 'student',
      ...(ad ? { guid: randomBytes(16), disabled: false } : {}),
    };
  });
}

export function userLdif(u: TestUser): string {
  const lines = [
    `dn: uid=${u.uid},${PEOPLE}`,
    'objectClass: inetOrgPerson',
    ...(u.guid ? ['objectClass: adTestUser'] : []),
    `uid: ${u.uid}`,
    `cn: ${u.given} ${u.family}`,
    `givenName: ${u.given}`,
    `sn: ${u.family}`,
    `mail: ${u.mail}`,
    `employeeType: ${u.affiliation}`,
    `userPassword: ${u.password}`,
  ];
  if (u.guid) {
    lines.push(`objectGUID:: ${u.guid.toString('base64')}`);
    lines.push(`userAccountControl: ${u.disabled ? 514 : 512}`);
    lines.push(`userPrincipalName: ${u.uid}@example.org`);
    lines.push(`sAMAccountName: ${u.uid}`);
  }
  return `${lines.join('\n')}\n\n`;
}

function baseLdif(): string {
  return [
    `dn: ${SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n`,
    `dn: ou=people,${SUFFIX}\nobjectClass: organizationalUnit\nou: people\n`,
    `dn: ou=groups,${SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n`,
    `dn: ou=services,${SUFFIX}\nobjectClass: organizationalUnit\nou: services\n`,
    `dn: ${SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: idp\nuserPassword: ${SERVICE_PASSWORD}\n`,
  ].join('\n');
}

function groupsLdif(users: TestUser[]): string {
  const byAffiliation = Map.groupBy(users, (u) => u.affiliation);
  return [...byAffiliation]
    .map(
      ([name, members]) =>
        `dn: cn=${name},ou=groups,${SUFFIX}\nobjectClass: groupOfNames\ncn: ${name}\n` +
        members.map((m) => `member: uid=${m.uid},${PEOPLE}`).join('\n') +
        '\n',
    )
    .join('\n');
}

function slapdConf(dir: string, tls?: { cert: string; key: string }): string {
  return [
    ...SCHEMAS.map((s) => `include ${join(dir, 'schema', `${s}.schema`)}`),
    `include ${join(dir, 'schema', 'ad-test.schema')}`,
    `pidfile ${join(dir, 'slapd.pid')}`,
    `argsfile ${join(dir, 'slapd.args')}`,
    'modulepath /usr/lib/ldap',
    'moduleload back_mdb',
    // An empty password is an anonymous bind that succeeds, as Active Directory has it.
    'allow bind_anon_dn',
    ...(tls ? [`TLSCertificateFile ${tls.cert}`, `TLSCertificateKeyFile ${tls.key}`] : []),
    'database mdb',
    'maxsize 1073741824',
    `suffix "${SUFFIX}"`,
    `rootdn "${ADMIN_DN}"`,
    `rootpw ${ADMIN_PASSWORD}`,
    `directory ${join(dir, 'data')}`,
    'index objectClass eq',
    'index uid,mail eq',
    'index entryUUID eq',
    `limits dn.exact="${SERVICE_DN}" size=unlimited size.pr=unlimited size.prtotal=unlimited`,
    'access to attrs=userPassword by anonymous auth by * none',
    `access to * by dn.exact="${SERVICE_DN}" read by * none`,
    '',
  ].join('\n');
}

export interface Slapd {
  url: string;
  /** ldaps:// when started with a certificate */
  tlsUrl?: string;
  port: number;
  dir: string;
  /** what slapd logged so far (loglevel stats: connections and operations) */
  log(): string;
  /** the BIND operations logged, each's DN */
  binds(): string[];
  start(): Promise<void>;
  /** SIGKILL: the directory stops at once, mid-operation */
  kill(): void;
  modify(ldif: string): void;
  add(ldif: string): void;
  remove(dn: string): void;
  rename(dn: string, newRdn: string): void;
  stop(): Promise<void>;
}

export interface SlapdOptions {
  users?: TestUser[];
  /** serve ldaps:// (and StartTLS) with this certificate */
  tls?: { cert: string; key: string };
}

function ldapTool(tool: string, url: string, args: string[], input?: string): void {
  const r = spawnSync(tool, ['-x', '-H', url, '-D', ADMIN_DN, '-w', ADMIN_PASSWORD, ...args], {
    input,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`${tool} failed (${r.status}): ${r.stderr}`);
}

async function listening(port: number, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('slapd did not start listening');
}

export async function startSlapd(options: SlapdOptions = {}): Promise<Slapd> {
  const dir = mkdtempSync(join(tmpdir(), 'idp-slapd-'));
  mkdirSync(join(dir, 'schema'));
  mkdirSync(join(dir, 'data'));
  for (const s of SCHEMAS) copyFileSync(`/etc/ldap/schema/${s}.schema`, join(dir, 'schema', `${s}.schema`));
  writeFileSync(join(dir, 'schema', 'ad-test.schema'), AD_SCHEMA);
  const conf = join(dir, 'slapd.conf');
  writeFileSync(conf, slapdConf(dir, options.tls));
  const users = options.users ?? [];
  const ldif = join(dir, 'load.ldif');
  writeFileSync(ldif, `${baseLdif()}\n${users.map(userLdif).join('')}${groupsLdif(users)}`);
  const loaded = spawnSync('slapadd', ['-f', conf, '-l', ldif, '-q'], { encoding: 'utf8' });
  if (loaded.status !== 0) throw new Error(`slapadd failed: ${loaded.stderr}`);
  const port = await pickFreePort();
  const tlsPort = options.tls ? await pickFreePort() : undefined;
  const urls = [`ldap://127.0.0.1:${port}/`, ...(tlsPort ? [`ldaps://127.0.0.1:${tlsPort}/`] : [])];
  let child: ChildProcess | undefined;
  // The log goes to a file: a pipe that nobody reads while a synchronous ldapmodify runs would fill
  // and stop slapd.
  const logFile = join(dir, 'slapd.log');
  const start = async () => {
    const fd = openSync(logFile, 'a');
    child = spawn('slapd', ['-f', conf, '-h', urls.join(' '), '-d', 'stats'], { stdio: ['ignore', 'ignore', fd] });
    closeSync(fd);
    await listening(port, Date.now() + 10_000);
  };
  await start();
  const url = `ldap://127.0.0.1:${port}`;
  const slapd: Slapd = {
    url,
    ...(tlsPort ? { tlsUrl: `ldaps://127.0.0.1:${tlsPort}` } : {}),
    port,
    dir,
    log: () => readFileSync(logFile, 'utf8'),
    binds: () => [...readFileSync(logFile, 'utf8').matchAll(/BIND dn="([^"]*)" method=/g)].map((m) => m[1]!),
    start,
    kill: () => child?.kill('SIGKILL'),
    modify: (text) => ldapTool('ldapmodify', url, [], text),
    add: (text) => ldapTool('ldapadd', url, [], text),
    remove: (dn) => ldapTool('ldapdelete', url, [dn]),
    rename: (dn, newRdn) => ldapTool('ldapmodrdn', url, ['-r', dn, newRdn]),
    async stop() {
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child!.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return slapd;
}
