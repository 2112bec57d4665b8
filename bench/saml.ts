// npm run bench -- saml [--db sqlite|postgres] [--users N] [--duration S] [--no-write] [--profile DIR]
// 1. SAML single sign-on for users who already have a session: an AuthnRequest over the HTTP-Redirect
//    binding in, a signed (assertion) and encrypted (AES-256-GCM, RSA-OAEP) Response out, as the
//    HTTP-POST form the browser would submit to the SP. 20 virtual users, each signed in once with
//    its password through the OpenID Connect flow (bench/signin-flow.ts) and once through the SAML
//    bridge to the SP, then asking again and again. Reports responses per second, p50/p99 and the
//    service's CPU per response (the PostgreSQL backends' own CPU is not counted).
// 2. A complete sign-in without a session, with the user's passkey, through each protocol in turn
//    (alternating rounds, so that drift over the run falls on both alike):
//    SAML (AuthnRequest, the sign-in page, the passkey, the Response form) and OpenID Connect (the
//    authorization request, the sign-in page, the passkey, the code, the token, userinfo). Reports
//    each one's sign-ins per second and service CPU per sign-in, and the ratio of SAML's to OIDC's.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyring } from '../src/crypto.ts';
import { buildRedirectQuery, createSelfSignedCertificate, readCertificate } from '../src/saml/xml/index.ts';
import { addServiceProvider } from '../src/service-providers/index.ts';
import { openStore } from '../src/store/index.ts';
import { shibbolethSp } from '../test/saml/sp-metadata-fixtures.ts';
import {
  cpuSeconds,
  machine,
  mergeResults,
  row,
  runLine,
  SECRET,
  startFlags,
  startService,
  withFreshPostgres,
} from './lib.ts';
import {
  authenticate,
  follow,
  FlowError,
  registerPasskey,
  seedSignIns,
  signIn,
  signInPage,
  type RelyingParty,
  type StepTimes,
  type Target,
  type VirtualUser,
} from './signin-flow.ts';

const GOAL_PER_SECOND = 300;
/** A complete SAML sign-in costs at most this many times an OpenID Connect one (service CPU). */
const GOAL_RATIO = 1.2;
const SP_HOST = 'sp.example.org';
const ENTITY_ID = `https://${SP_HOST}/shibboleth`;
const ACS = `https://${SP_HOST}/Shibboleth.sso/SAML2/POST`;

interface Options {
  users: number;
  duration: number;
  warmUp: number;
  dbs: ('sqlite' | 'postgres')[];
  write: boolean;
  profileDir?: string;
}

interface Cell {
  database: string;
  responses: number;
  perSecond: number;
  p50: number;
  p99: number;
  cpuMsPerResponse: number;
  errors: number;
  complete?: Comparison;
}

/** Complete passkey sign-ins without a session, SAML against OpenID Connect. */
interface Comparison {
  samlPerSecond: number;
  oidcPerSecond: number;
  samlCpuMs: number;
  oidcCpuMs: number;
  ratio: number;
  errors: number;
}

function parseOptions(args: string[]): Options {
  const value = (name: string) => {
    const at = args.indexOf(`--${name}`);
    return at >= 0 ? args[at + 1] : undefined;
  };
  const db = value('db');
  return {
    users: Number(value('users') ?? 20),
    duration: Number(value('duration') ?? 10),
    warmUp: 3,
    dbs: db === 'sqlite' || db === 'postgres' ? [db] : ['sqlite', 'postgres'],
    write: !args.includes('--no-write'),
    profileDir: value('profile'),
  };
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

function authnRequest(publicUrl: string): string {
  const id = `_${randomBytes(16).toString('hex')}`;
  return (
    `<samlp:AuthnRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ` +
    `ID="${id}" Version="2.0" IssueInstant="${iso(Date.now())}" Destination="${publicUrl}/saml2/idp/sso" ` +
    `AssertionConsumerServiceURL="${ACS}" ProtocolBinding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST">` +
    `<saml:Issuer>${ENTITY_ID}</saml:Issuer><samlp:NameIDPolicy AllowCreate="true"/></samlp:AuthnRequest>`
  );
}

function expectResponseForm(answer: { status: number; body: string }): void {
  if (answer.status !== 200 || !answer.body.includes('name="SAMLResponse"'))
    throw new FlowError(`SSO answered ${answer.status}: ${answer.body.slice(0, 200)}`);
}

async function sso(target: Target, user: VirtualUser): Promise<void> {
  const query = buildRedirectQuery({ parameter: 'SAMLRequest', xml: authnRequest(target.publicUrl) });
  expectResponseForm(await follow(target, user.jar, `/saml2/idp/sso?${query}`));
}

/**
 * A complete SAML sign-in without a session: the AuthnRequest, on through the bridge to the sign-in
 * page, the passkey, then back through the continuation to the Response form.
 */
async function samlSignIn(target: Target, user: VirtualUser): Promise<void> {
  user.jar.retain(/idp_browser$/);
  const times: StepTimes = {};
  const query = buildRedirectQuery({ parameter: 'SAMLRequest', xml: authnRequest(target.publicUrl) });
  const toPage = await follow(target, user.jar, `/saml2/idp/sso?${query}`, /\/interaction\/[^/?]+$/);
  if (!toPage.location) throw new FlowError(`SSO without a session answered ${toPage.status}, not the sign-in page`);
  const { uid, csrf } = await signInPage(target, user, toPage.location, times);
  const resume = await authenticate(target, user, { uid, csrf, mode: 'passkey', times });
  expectResponseForm(await follow(target, user.jar, resume));
}

async function spMetadata(): Promise<string> {
  const key = () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const cert = async () =>
    readCertificate(await createSelfSignedCertificate({ privateKey: key(), commonName: SP_HOST })).base64;
  return shibbolethSp({ signing: await cert(), encryption: await cert() }, SP_HOST);
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0;

async function drive(
  target: Target,
  users: VirtualUser[],
  seconds: number,
  flow: (target: Target, user: VirtualUser) => Promise<unknown> = sso,
) {
  const until = performance.now() + seconds * 1000;
  const times: number[] = [];
  let errors = 0;
  await Promise.all(
    users.map(async (user) => {
      while (performance.now() < until) {
        const started = performance.now();
        try {
          await flow(target, user);
          times.push(performance.now() - started);
        } catch (error) {
          if (errors++ === 0) console.error(`# first error: ${(error as Error).message}`);
        }
      }
    }),
  );
  return { times: times.sort((a, b) => a - b), errors };
}

async function measureDatabase(database: string, databaseUrl: string, port: number, o: Options): Promise<Cell> {
  const publicUrl = `http://127.0.0.1:${port}`;
  const store = await openStore(databaseUrl);
  const seeded = await seedSignIns(store, keyring(SECRET), publicUrl, o.users);
  await addServiceProvider(store, {
    metadata: await spMetadata(),
    groups: ['userid-idp', 'userinfo-name', 'email', 'groups-org'],
    firstParty: true,
  }).finally(() => store.close());
  const target: Target = { url: publicUrl, publicUrl };
  const users = seeded.users.map((s) => s.user);
  const flags = o.profileDir ? [...startFlags(), '--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : startFlags();
  const service = await startService({ DATABASE_URL: databaseUrl, IDP_SECRET: SECRET }, port, flags);
  try {
    // a session per user, and the SP once through the sign-in bridge, so every later request takes the session
    for (const user of users) {
      await signIn(target, seeded.rp, user, 'password');
      await sso(target, user);
    }
    await drive(target, users, o.warmUp);
    const { times, errors, cpuMs } = await measured(service.pid, () => drive(target, users, o.duration));
    const cell: Cell = {
      database,
      responses: times.length,
      perSecond: round(times.length / o.duration),
      p50: round(percentile(times, 50)),
      p99: round(percentile(times, 99)),
      cpuMsPerResponse: round(cpuMs / Math.max(1, times.length)),
      errors,
    };
    for (const { user, recoveryUrl } of seeded.users) await registerPasskey(target, user, recoveryUrl);
    return { ...cell, complete: await compareSignIns(target, service.pid, seeded.rp, users, o) };
  } finally {
    await service.stop();
  }
}

const round = (x: number) => Math.round(x * 10) / 10;

/** Runs fn, adding the service's CPU milliseconds spent meanwhile to its answer. */
async function measured<T extends object>(pid: number, fn: () => Promise<T>): Promise<T & { cpuMs: number }> {
  const before = cpuSeconds(pid) ?? 0;
  const result = await fn();
  return { ...result, cpuMs: ((cpuSeconds(pid) ?? 0) - before) * 1000 };
}

/** The comparison alternates in this many rounds of each protocol, so drift over the run (a growing
 * database, the heap, the machine's other work) falls on both alike. */
const ROUNDS = 5;

/**
 * Complete passkey sign-ins without a session: SAML, then OpenID Connect, in ROUNDS alternating
 * rounds of o.duration / ROUNDS seconds each; each protocol's CPU and sign-ins summed over its rounds.
 */
async function compareSignIns(
  target: Target,
  pid: number,
  rp: RelyingParty,
  users: VirtualUser[],
  o: Options,
): Promise<Comparison> {
  const oidc = (t: Target, user: VirtualUser) => signIn(t, rp, user, 'passkey');
  await drive(target, users, o.warmUp, samlSignIn);
  await drive(target, users, o.warmUp, oidc);
  const sum = { saml: { count: 0, cpuMs: 0, errors: 0 }, oidc: { count: 0, cpuMs: 0, errors: 0 } };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, flow] of [
      ['saml', samlSignIn],
      ['oidc', oidc],
    ] as const) {
      const run = await measured(pid, () => drive(target, users, o.duration / ROUNDS, flow));
      sum[name].count += run.times.length;
      sum[name].cpuMs += run.cpuMs;
      sum[name].errors += run.errors;
    }
  }
  const samlCpuMs = sum.saml.cpuMs / Math.max(1, sum.saml.count);
  const oidcCpuMs = sum.oidc.cpuMs / Math.max(1, sum.oidc.count);
  return {
    samlPerSecond: round(sum.saml.count / o.duration),
    oidcPerSecond: round(sum.oidc.count / o.duration),
    samlCpuMs: round(samlCpuMs),
    oidcCpuMs: round(oidcCpuMs),
    ratio: Math.round((samlCpuMs / oidcCpuMs) * 100) / 100,
    errors: sum.saml.errors + sum.oidc.errors,
  };
}

function comparisonTable(cells: Cell[]): string {
  return [
    row([
      'database',
      'SAML sign-ins/s',
      'OIDC sign-ins/s',
      'SAML CPU ms',
      'OIDC CPU ms',
      'SAML / OIDC',
      'errors',
      `goal ≤ ${GOAL_RATIO}`,
    ]),
    row(['---', '---', '---', '---', '---', '---', '---', '---']),
    ...cells.flatMap(({ database, complete: c }) =>
      c
        ? [
            row([
              database,
              c.samlPerSecond,
              c.oidcPerSecond,
              c.samlCpuMs,
              c.oidcCpuMs,
              c.ratio,
              c.errors,
              c.ratio <= GOAL_RATIO ? 'met' : 'not met',
            ]),
          ]
        : [],
    ),
  ].join('\n');
}

function table(cells: Cell[]): string {
  return [
    row([
      'database',
      'responses/s',
      'p50 ms',
      'p99 ms',
      'service CPU ms per response',
      'errors',
      `goal ≥ ${GOAL_PER_SECOND}/s`,
    ]),
    row(['---', '---', '---', '---', '---', '---', '---']),
    ...cells.map((c) =>
      row([
        c.database,
        c.perSecond,
        c.p50,
        c.p99,
        c.cpuMsPerResponse,
        c.errors,
        c.perSecond >= GOAL_PER_SECOND ? 'met' : 'not met',
      ]),
    ),
  ].join('\n');
}

async function writeJson(figures: object): Promise<void> {
  await mergeResults({ saml: figures });
}

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  const load = () =>
    loadavg()
      .map((x) => x.toFixed(1))
      .join(' ');
  console.log(`# SAML SSO with a session — ${machine()}; load average ${load()}`);
  console.log(`# ${o.users} users, ${o.duration} s per database after ${o.warmUp} s of warm-up; one process`);
  const cells: Cell[] = [];
  if (o.dbs.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-saml-'));
    try {
      cells.push(await measureDatabase('SQLite', join(dir, 'idp.sqlite'), 18121, o));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (o.dbs.includes('postgres')) {
    const cell = await withFreshPostgres('idp_bench_saml', (url) => measureDatabase('PostgreSQL', url, 18122, o));
    if (cell) cells.push(cell);
  }
  console.log(`\n${runLine()}\n\nWith a session:\n\n${table(cells)}`);
  console.log(`\nComplete passkey sign-in without a session (service CPU per sign-in):\n\n${comparisonTable(cells)}`);
  if (o.write) {
    await writeJson({
      started: new Date().toISOString(),
      machine: machine(),
      goalPerSecond: GOAL_PER_SECOND,
      goalRatio: GOAL_RATIO,
      cells,
    });
    console.log('written to bench/results.json');
  }
}
