// The passkey lifecycle through HTTP: removing the password on /account (and its old password then
// failing like any wrong one), passkey-only organizations, recovery link pages, the Signal API data
// on the account page, /.well-known/webauthn, and `org policy`.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cli,
  cookieBrowser,
  dialects,
  seedClient,
  p256Credential,
  startTestApp,
  seedOrg,
  seedUser,
  coseP256PublicKey,
  PUBLIC_URL,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { findUserById, type User } from '../../src/store/directory.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { ACR_MFA } from '../../src/oauth/authentication-context.ts';
import { assertion } from '../authenticator.ts';
import { loadConfig, ConfigError } from '../../src/config.ts';

const PASSWORD = 'correct horse battery staple';
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
const alertOf = (body: string) => /<p class="alert" role="alert">([^<]*)<\/p>/.exec(body)?.[1];

async function addPasskey(ctx: TestContext, user: User, credential: string) {
  const [id] = await insertPasskeys(ctx.store.db, [
    {
      user_id: user.id,
      org_id: user.org_id,
      credential_id: Buffer.from(credential),
      public_key: await coseP256PublicKey(),
      sign_count: 0,
      transports: '[]',
      label: 'Key',
      aaguid: ZERO_AAGUID,
      backup_eligible: 1,
      backup_state: 1,
      mfa_verified: 1,
      created_at: Date.now(),
      last_used_at: null,
    },
  ]);
  return id!;
}

const SVG = `data:image/svg+xml;base64,${Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>').toString('base64')}`;
const OWN_AAGUID = '11111111-2222-3333-4444-555555555555';

function aaguidFile(content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'idp-aaguid-'));
  const path = join(dir, 'aaguid.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('AAGUID_DATA_FILE is read and checked at start', () => {
  const base = { PUBLIC_URL, DATABASE_URL: ':memory:', IDP_SECRET: 'x'.repeat(32) };
  it('takes names and icons in the community format; refuses junk with the entry it is about', () => {
    const good = loadConfig({
      ...base,
      AAGUID_DATA_FILE: aaguidFile({
        [OWN_AAGUID.toUpperCase()]: { name: 'Campus Key', icon_light: SVG, icon_dark: SVG },
      }),
    });
    assert.deepEqual(good.aaguidData?.get(OWN_AAGUID), { name: 'Campus Key', iconLight: SVG, iconDark: SVG });
    for (const [content, message] of [
      ['{', /is not JSON/],
      [[], /is not a JSON object/],
      [{ nope: { name: 'x' } }, /not an AAGUID/],
      [{ [OWN_AAGUID]: {} }, /name is missing/],
      [{ [OWN_AAGUID]: { name: 'x', icon_dark: 'javascript:alert(1)' } }, /icon_dark is not a base64 image data: URI/],
    ] as const)
      assert.throws(() => loadConfig({ ...base, AAGUID_DATA_FILE: aaguidFile(content) }), message);
    assert.throws(() => loadConfig({ ...base, AAGUID_DATA_FILE: '/nonexistent/aaguid.json' }), /AAGUID_DATA_FILE/);
  });
});

describe('WEBAUTHN_RELATED_ORIGINS and hints are checked at start', () => {
  const base = { PUBLIC_URL, DATABASE_URL: ':memory:', IDP_SECRET: 'x'.repeat(32) };
  it('refuses origins with a path, plain http or junk, and unknown hints', () => {
    for (const bad of ['https://a.example/path', 'http://a.example', 'nonsense', 'https://a.example/'])
      assert.throws(() => loadConfig({ ...base, WEBAUTHN_RELATED_ORIGINS: bad }), ConfigError, bad);
    assert.throws(() => loadConfig({ ...base, WEBAUTHN_AUTHENTICATION_HINTS: 'usb' }), /not a WebAuthn hint/);
    const ok = loadConfig({
      ...base,
      WEBAUTHN_RELATED_ORIGINS: 'https://a.example, https://b.example:8443',
      WEBAUTHN_AUTHENTICATION_HINTS: 'client-device',
    });
    assert.deepEqual(ok.webauthnRelatedOrigins, ['https://a.example', 'https://b.example:8443']);
    assert.deepEqual(ok.webauthnHints, { registration: [], authentication: ['client-device'] });
  });
});

for (const dialect of dialects()) {
  describe(`passkey lifecycle pages (${dialect})`, () => {
    let ctx: TestContext;
    let ada: User;
    let bea: User;

    before(async () => {
      ctx = await startTestApp(dialect, {
        WEBAUTHN_RELATED_ORIGINS: 'https://login.example.com',
        AAGUID_DATA_FILE: aaguidFile({ [OWN_AAGUID]: { name: 'Campus Key', icon_light: SVG, icon_dark: SVG } }),
      });
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'strict.org', 'Strict');
      ada = await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      bea = await seedUser(ctx, 2, 'bea@strict.org', { password: PASSWORD });
    });
    after(() => ctx.close());

    const browser = () => cookieBrowser(ctx.app);

    async function signIn(username: string, password: string) {
      const b = browser();
      const form = csrfOf((await b.get('/account')).body);
      const res = await b.post('/account/login', { _csrf: form, username, password });
      return { b, res };
    }

    it('offers a passkey after a password sign-in only to a browser whose page says it can make one', async () => {
      const rp = await seedClient(ctx, {
        name: 'Offer RP',
        redirectUris: ['https://rp.example.org/cb'],
        firstParty: true,
      });
      const fresh = await seedUser(ctx, 1, 'fay@example.org', { password: PASSWORD });
      for (const capable of [false, true]) {
        const b = browser();
        const start = await b.get(
          `/oauth/authorization?client_id=${rp.clientId}&response_type=code&scope=openid&redirect_uri=${encodeURIComponent('https://rp.example.org/cb')}&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`,
        );
        const page = await b.get(start.headers.location as string);
        const uid = /\/interaction\/([^/"]+)\/login/.exec(page.body)![1]!;
        const form = {
          _csrf: csrfOf(page.body),
          username: fresh.eppn,
          password: PASSWORD,
          ...(capable ? { webauthn: '1' } : {}),
        };
        const res = await b.post(`/interaction/${uid}/login`, form);
        if (!capable) {
          assert.equal(res.statusCode, 303, 'no offer to a browser that did not say it can make passkeys');
          continue;
        }
        assert.equal(res.statusCode, 200);
        assert.match(res.body, /<h1>Sign in faster next time<\/h1>/);
        assert.match(res.body, /id="offer-later"/);
        const later = await b.post(`/interaction/${uid}/offer/later`, { _csrf: csrfOf(res.body) });
        assert.equal(later.statusCode, 303);
        assert.match(String(later.headers.location), /\/oauth\/authorization\//, 'on to the provider with the sign-in');
        assert.ok(later.cookies.some((c) => c.name === 'idp_passkey_offer' && c.httpOnly && (c.maxAge ?? 0) > 0));
      }
    });

    it('a passkey that cannot reach any class the request asks for is refused at the sign-in page', async () => {
      const rp = await seedClient(ctx, {
        name: 'Strict RP',
        redirectUris: ['https://rp.example.org/cb'],
        firstParty: true,
      });
      const gus = await seedUser(ctx, 1, 'gus@example.org');
      const key = p256Credential();
      await insertPasskeys(ctx.store.db, [
        {
          user_id: gus.id,
          org_id: 1,
          credential_id: key.id,
          public_key: key.cose,
          sign_count: 0,
          transports: '[]',
          label: 'Key',
          aaguid: ZERO_AAGUID,
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: Date.now(),
          last_used_at: null,
        },
      ]);
      let counter = 0;
      // flags: UP 0x01, UV 0x04
      for (const [acr, flags, expected] of [
        ['phrh', 0x05, 403],
        [ACR_MFA, 0x01, 403],
        [ACR_MFA, 0x05, 303],
      ] as const) {
        const b = browser();
        const start = await b.get(
          `/oauth/authorization?client_id=${rp.clientId}&response_type=code&scope=openid&acr_values=${encodeURIComponent(acr)}&redirect_uri=${encodeURIComponent('https://rp.example.org/cb')}&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`,
        );
        const page = await b.get(start.headers.location as string);
        const uid = /\/interaction\/([^/"]+)\/passkey"/.exec(page.body)![1]!;
        const options = await b.post(`/interaction/${uid}/passkey/options`, {}, { 'x-csrf-token': csrfOf(page.body) });
        assert.equal(options.json().userVerification, acr === 'phrh' || acr === ACR_MFA ? 'required' : 'preferred');
        const response = assertion(key, options.json().challenge, ++counter, { userHandle: gus.sub, flags });
        const res = await b.post(`/interaction/${uid}/passkey`, {
          _csrf: csrfOf(page.body),
          response: JSON.stringify(response),
        });
        assert.equal(res.statusCode, expected, `${acr} with flags ${flags}`);
        if (expected === 403) assert.match(alertOf(res.body) ?? '', /asks for a stronger passkey/);
      }
    });

    it('serves /.well-known/webauthn from WEBAUTHN_RELATED_ORIGINS', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/.well-known/webauthn' });
      assert.equal(res.statusCode, 200);
      assert.match(res.headers['content-type'] as string, /^application\/json/);
      assert.deepEqual(res.json(), { origins: ['https://login.example.com'] });
    });

    it('the account page tells the credential manager the passkeys and names, and offers password removal', async () => {
      const { b, res } = await signIn('ada@example.org', PASSWORD);
      assert.equal(res.statusCode, 303);
      let page = (await b.get('/account')).body;
      assert.doesNotMatch(page, /Remove password/, 'no passkey: no removal');
      assert.match(page, /data-accepted=""/);
      await addPasskey(ctx, ada, 'ada-credential');
      page = (await b.get('/account')).body;
      assert.match(page, /<button type="submit" class="secondary" id="remove-password">Remove password<\/button>/);
      assert.match(page, /src="\/static\/signals.js"/);
      assert.match(page, new RegExp(`data-user-id="${Buffer.from(ada.sub).toString('base64url')}"`));
      assert.match(page, new RegExp(`data-accepted="${Buffer.from('ada-credential').toString('base64url')}"`));
      assert.match(page, /data-name="ada@example.org"/);
      assert.match(page, /Synced passkey/);
      await ctx.store.db.updateTable('passkeys').set({ aaguid: OWN_AAGUID }).where('user_id', '=', ada.id).execute();
      page = (await b.get('/account')).body;
      assert.match(page, /<source srcset="data:image\/svg\+xml;base64,[^"]+" media="\(prefers-color-scheme: dark\)">/);
      assert.match(page, /class="authenticator-icon"[^>]*><\/picture> Campus Key<\/dd>/);
      const details = await cli(
        ctx.config.databaseUrl,
        ['passkey', 'list', '--org', '1', '--eppn', 'ada@example.org', '--details', '--json'],
        '',
        {
          AAGUID_DATA_FILE: aaguidFile({ [OWN_AAGUID]: { name: 'Campus Key' } }),
        },
      );
      assert.equal(details.code, 0, details.err);
      assert.deepEqual(JSON.parse(details.out)[0].authenticator, {
        name: 'Campus Key',
        synced: true,
        backed_up: true,
        user_verified: true,
        transports: [],
        attested: false,
        metadata_status: null,
      });
    });

    it('removes the password after an in-page confirmation; the old password then fails like a wrong one', async () => {
      const { b } = await signIn('ada@example.org', PASSWORD);
      const token = csrfOf((await b.get('/account')).body);
      const noCsrf = await b.post('/account/password/remove', { confirm: 'yes' });
      assert.equal(noCsrf.statusCode, 403);
      const ask = await b.post('/account/password/remove', { _csrf: token });
      assert.equal(ask.statusCode, 200);
      assert.match(ask.body, /Remove your password\?/);
      assert.match(ask.body, /name="confirm" value="yes"/);
      assert.notEqual((await findUserById(ctx.store.db, ada.id))?.password_hash, null, 'asked, not done');
      const done = await b.post('/account/password/remove', { _csrf: csrfOf(ask.body), confirm: 'yes' });
      assert.equal(done.statusCode, 303);
      assert.equal(done.headers.location, '/account?done=password_removed');
      assert.equal((await findUserById(ctx.store.db, ada.id))?.password_hash, null);
      assert.equal((await listAuditEvents(ctx.store.db, { action: 'password.remove' })).length, 1);

      const old = await signIn('ada@example.org', PASSWORD);
      const wrong = await signIn('ada@example.org', 'not the password at all');
      const nobody = await signIn('nobody@example.org', PASSWORD);
      assert.equal(old.res.statusCode, 401);
      assert.equal(alertOf(old.res.body), alertOf(wrong.res.body));
      assert.equal(alertOf(old.res.body), alertOf(nobody.res.body));
      assert.equal(old.res.statusCode, wrong.res.statusCode);
    });

    it('a passkey-only organization refuses the password of a user with a passkey like a wrong one', async () => {
      const set = await cli(ctx.config.databaseUrl, ['org', 'policy', '2', '--passkey-only', 'on', '--json']);
      assert.equal(set.code, 0, set.err);
      assert.equal(JSON.parse(set.out).policy.passkey_only, true);
      assert.equal((await signIn('bea@strict.org', PASSWORD)).res.statusCode, 303, 'no passkey yet: password works');
      await addPasskey(ctx, bea, 'bea-credential');
      const refused = await signIn('bea@strict.org', PASSWORD);
      const wrong = await signIn('bea@strict.org', 'wrong wrong wrong');
      assert.equal(refused.res.statusCode, 401);
      assert.equal(alertOf(refused.res.body), alertOf(wrong.res.body));
      const failed = (await listAuditEvents(ctx.store.db, { action: 'signin.failed' })).map(
        (a) => JSON.parse(a.details) as { reason?: string },
      );
      assert.ok(failed.some((d) => d.reason === 'passkey_only'));
      await cli(ctx.config.databaseUrl, ['org', 'policy', '2', '--passkey-only', 'off']);
      assert.equal((await signIn('bea@strict.org', PASSWORD)).res.statusCode, 303);
    });

    it('org policy: shows, changes and refuses bad input without changing anything', async () => {
      const db = ctx.config.databaseUrl;
      const shown = await cli(db, ['org', 'policy', '1', '--show', '--json']);
      assert.deepEqual(JSON.parse(shown.out), {
        id: 1,
        policy: {
          allow_aaguids: [],
          deny_aaguids: [],
          require_uv: false,
          require_device_bound: false,
          attestation: 'none',
          passkey_upgrade: true,
          passkey_only: false,
          on_deactivate: 'keep',
          self_recovery: 'off',
        },
      });
      const aaguid = 'CB69481E-8FF7-4039-93EC-0A2729A154A8';
      const changed = await cli(db, [
        'org',
        'policy',
        '1',
        '--deny-aaguid',
        aaguid,
        '--require-uv',
        '--attestation',
        'direct',
        '--on-deactivate',
        'delete',
        '--json',
      ]);
      assert.equal(changed.code, 0, changed.err);
      const policy = JSON.parse(changed.out).policy;
      assert.deepEqual(policy.deny_aaguids, [aaguid.toLowerCase()]);
      assert.equal(policy.require_uv, true);
      assert.equal(policy.attestation, 'direct');
      assert.equal(policy.on_deactivate, 'delete');
      const human = await cli(db, ['org', 'policy', '1']);
      assert.match(human.out, /require_uv: true/);
      for (const [args, message] of [
        [['--deny-aaguid', 'nope'], /not an AAGUID/],
        [['--attestation', 'indirect'], /must be one of none, direct, enterprise/],
        [['--passkey-upgrade', 'yes'], /must be on or off/],
        [['--on-deactivate', 'remove'], /must be keep or delete/],
        [['--allow-aaguid', aaguid, '--deny-aaguid', aaguid], /both allowed and denied/],
      ] as const) {
        const res = await cli(db, ['org', 'policy', '1', ...args]);
        assert.equal(res.code, 1, args.join(' '));
        assert.match(res.err, message);
      }
      assert.match((await cli(db, ['org', 'policy', '9', '--require-uv'])).err, /organization 9 not found/);
      assert.match((await cli(db, ['org', 'policy', '9', '--show'])).err, /organization 9 not found/);
      assert.deepEqual(JSON.parse((await cli(db, ['org', 'policy', '1', '--json'])).out).policy, policy, 'unchanged');
      const reset = JSON.parse((await cli(db, ['org', 'policy', '1', '--reset', '--json'])).out).policy;
      assert.equal(reset.require_uv, false);
      assert.deepEqual(reset.deny_aaguids, []);
    });

    it('a recovery link opens a page once; used, revoked, unknown links get a clear page', async () => {
      const created = await cli(ctx.config.databaseUrl, ['recovery', 'create', 'ada@example.org', '--json']);
      assert.equal(created.code, 0, created.err);
      const link = JSON.parse(created.out) as { id: number; url: string };
      assert.ok(link.url.startsWith(`${PUBLIC_URL}/recover/`));
      const path = new URL(link.url).pathname;
      const b = browser();
      const page = await b.get(path);
      assert.equal(page.statusCode, 200);
      assert.equal(page.headers['cache-control'], 'no-store');
      assert.match(page.body, /<h1>Register a new passkey<\/h1>/);
      assert.match(page.body, /id="recovery-button"/);
      const noCsrf = await b.post(`${path}/options`, {});
      assert.equal(noCsrf.statusCode, 403);
      const options = await b.post(`${path}/options`, {}, { 'x-csrf-token': csrfOf(page.body) });
      assert.equal(options.statusCode, 200);
      assert.equal(options.json().user.name, 'ada@example.org');
      const junk = await b.post(path, { _csrf: csrfOf(page.body), response: '{"id":' });
      assert.equal(junk.statusCode, 400);
      assert.match(junk.body, /The passkey was not created/);
      assert.equal((await b.get(path)).statusCode, 200, 'a failed attempt does not use the link up');

      const listed = JSON.parse(
        (await cli(ctx.config.databaseUrl, ['recovery', 'list', '--eppn', 'ada@example.org', '--json'])).out,
      );
      assert.equal(listed[0].state, 'usable');
      assert.ok(!JSON.stringify(listed).includes(path.split('/').pop()!), 'the secret is never listed');
      assert.equal((await cli(ctx.config.databaseUrl, ['recovery', 'revoke', String(link.id)])).code, 0);
      for (const gone of [path, '/recover/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', '/recover/short']) {
        const res = await b.get(gone);
        assert.equal(res.statusCode, 404, gone);
        assert.match(res.body, /This recovery link cannot be used/);
      }
      const revokedAgain = await cli(ctx.config.databaseUrl, ['recovery', 'revoke', String(link.id)]);
      assert.equal(revokedAgain.code, 1);
      for (const [args, message] of [
        [['recovery', 'create', 'nobody@example.org'], /does not exist/],
        [['recovery', 'create', 'ada@example.org', '--ttl', '40d'], /between 1 minute and 30 days/],
        [['recovery', 'create', 'ada@example.org', '--ttl', 'soon'], /duration/],
        [['recovery', 'list'], /give --eppn or --org/],
      ] as const) {
        const res = await cli(ctx.config.databaseUrl, [...args]);
        assert.equal(res.code, 1, args.join(' '));
        assert.match(res.err, message);
      }
    });
  });
}
