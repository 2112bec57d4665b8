// The WebAuthn ceremonies with hand-made authenticator responses: single-use, bound and expiring
// challenges, counter regression, user handles, malformed input, registration fields and AAGUIDs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { assertion, attestation } from '../authenticator.ts';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  PUBLIC_URL,
  p256Credential,
  type TestContext,
  type TestCredential,
} from '../helpers.ts';
import { createWebAuthn, CHALLENGE_TTL_MS, type WebAuthn } from '../../src/webauthn/ceremonies.ts';
import { authenticatorName } from '../../src/webauthn/aaguid.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import type { User } from '../../src/store/directory.ts';

const GOOGLE_PM = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';

for (const dialect of dialects()) {
  describe(`WebAuthn ceremonies (${dialect})`, () => {
    let ctx: TestContext;
    let webauthn: WebAuthn;
    let clock = Date.now();
    let ada: User;
    let bob: User;
    let key: TestCredential;
    let passkeyId: number;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      ada = await seedUser(ctx, 1, 'ada@example.org');
      bob = await seedUser(ctx, 1, 'bob@example.org');
      webauthn = createWebAuthn(ctx.config, ctx.store, () => clock);
      key = p256Credential();
      [passkeyId] = (await insertPasskeys(ctx.store.db, [
        {
          user_id: ada.id,
          org_id: 1,
          credential_id: key.id,
          public_key: key.cose,
          sign_count: 5,
          transports: '["internal"]',
          label: 'Laptop',
          aaguid: ZERO_AAGUID,
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: clock,
          last_used_at: null,
        },
      ])) as [number];
    });
    after(() => ctx.close());

    const row = async () => (await listUserCredentials(ctx.store.db, ada.id)).find((p) => p.id === passkeyId)!;
    /** An assertion from one of Ada's discoverable credentials, which always carries her user handle. */
    const signed = (
      k: TestCredential,
      challenge: string,
      counter: number,
      opts: Parameters<typeof assertion>[3] = {},
    ) => assertion(k, challenge, counter, { userHandle: ada.sub, ...opts });

    it('derives RP ID and origin from PUBLIC_URL and asks for discoverable credentials', async () => {
      assert.equal(webauthn.rpId, 'idp.example.test');
      assert.equal(webauthn.origin, PUBLIC_URL);
      const options = await webauthn.authenticationOptions('b1');
      assert.equal(options.rpId, 'idp.example.test');
      assert.equal(options.userVerification, 'preferred');
      assert.ok(!options.allowCredentials || options.allowCredentials.length === 0);
      const reg = await webauthn.registrationOptions(ada, await listUserCredentials(ctx.store.db, ada.id), 'r1');
      assert.equal(reg.authenticatorSelection?.residentKey, 'required');
      assert.equal(reg.authenticatorSelection?.userVerification, 'preferred');
      assert.equal(reg.attestation, 'none');
      assert.equal(reg.rp.id, 'idp.example.test');
      assert.equal(Buffer.from(reg.user.id, 'base64url').toString(), ada.sub);
      assert.deepEqual(
        reg.excludeCredentials?.map((c) => c.id),
        [key.id.toString('base64url')],
      );
    });

    it('accepts a genuine assertion once, records counter and last use, and refuses its replay', async () => {
      const { challenge } = await webauthn.authenticationOptions('b1');
      const response = signed(key, challenge, 6, { userHandle: ada.sub });
      const ok = await webauthn.verifyAuthentication(JSON.stringify(response), 'b1', 'req-1');
      assert.equal(ok.ok, true);
      assert.equal(ok.ok && ok.user.id, ada.id);
      assert.equal(ok.ok && ok.userVerified, true);
      const after = await row();
      assert.equal(Number(after.sign_count), 6);
      assert.equal(after.last_used_at, clock);
      // the first use is audited, and an event, once
      const firstUses = await listAuditEvents(ctx.store.db, { action: 'passkey.first_use', after: 0 });
      assert.deepEqual(
        firstUses.map((e) => [e.eppn, JSON.parse(e.passkey_ids)]),
        [['ada@example.org', [passkeyId]]],
      );
      const events = await ctx.store.db
        .selectFrom('events')
        .selectAll()
        .where('type', '=', 'passkey.first_used')
        .execute();
      assert.deepEqual(
        events.map((e) => JSON.parse(e.data).id),
        [passkeyId],
      );
      assert.deepEqual(await webauthn.verifyAuthentication(JSON.stringify(response), 'b1', 'req-2'), {
        ok: false,
        reason: 'challenge',
      });
      assert.deepEqual(await row(), after);
    });

    it('refuses a challenge issued to another binding, for another purpose, or expired', async () => {
      const other = await webauthn.authenticationOptions('b1');
      assert.deepEqual(await webauthn.verifyAuthentication(signed(key, other.challenge, 7), 'b2', 'r'), {
        ok: false,
        reason: 'challenge',
      });
      const reg = await webauthn.registrationOptions(ada, [], 'b1');
      assert.deepEqual(await webauthn.verifyAuthentication(signed(key, reg.challenge, 7), 'b1', 'r'), {
        ok: false,
        reason: 'challenge',
      });
      const old = await webauthn.authenticationOptions('b1');
      clock += CHALLENGE_TTL_MS + 1;
      assert.deepEqual(await webauthn.verifyAuthentication(signed(key, old.challenge, 7), 'b1', 'r'), {
        ok: false,
        reason: 'challenge',
      });
      const never = randomBytes(32).toString('base64url');
      assert.deepEqual(await webauthn.verifyAuthentication(signed(key, never, 7), 'b1', 'r'), {
        ok: false,
        reason: 'challenge',
      });
      assert.equal(Number((await row()).sign_count), 6);
    });

    it('refuses another RP ID, an unknown credential, a foreign user handle and a bad signature', async () => {
      const rp = await webauthn.authenticationOptions('b1');
      assert.deepEqual(
        await webauthn.verifyAuthentication(signed(key, rp.challenge, 7, { rpId: 'evil.example' }), 'b1', 'r'),
        { ok: false, reason: 'verification' },
      );
      const unknown = await webauthn.authenticationOptions('b1');
      assert.deepEqual(
        await webauthn.verifyAuthentication(assertion(p256Credential(), unknown.challenge, 7), 'b1', 'r'),
        { ok: false, reason: 'unknown_credential' },
      );
      const handle = await webauthn.authenticationOptions('b1');
      assert.deepEqual(
        await webauthn.verifyAuthentication(signed(key, handle.challenge, 7, { userHandle: bob.sub }), 'b1', 'r'),
        { ok: false, reason: 'verification' },
      );
      const forged = await webauthn.authenticationOptions('b1');
      const bad = signed(key, forged.challenge, 7);
      bad.response.signature = assertion(p256Credential(), forged.challenge, 7).response.signature;
      assert.deepEqual(await webauthn.verifyAuthentication(bad, 'b1', 'r'), { ok: false, reason: 'verification' });
      assert.equal(Number((await row()).sign_count), 6);
    });

    it('refuses a counter that does not increase and writes it to the audit log', async () => {
      const before = await row();
      for (const counter of [3, 6]) {
        const { challenge } = await webauthn.authenticationOptions('b1');
        assert.deepEqual(await webauthn.verifyAuthentication(signed(key, challenge, counter), 'b1', `req-${counter}`), {
          ok: false,
          reason: 'counter_regression',
        });
      }
      assert.deepEqual(await row(), before);
      const events = await listAuditEvents(ctx.store.db, { action: 'passkey.counter_regression', after: 0 });
      assert.equal(events.length, 2);
      assert.equal(events[0]!.eppn, 'ada@example.org');
      assert.equal(events[0]!.org_id, 1);
      assert.equal(events[0]!.request_id, 'req-3');
      assert.deepEqual(JSON.parse(events[0]!.details), { stored_counter: 6, presented_counter: 3 });
    });

    it('accepts authenticators without a counter (always zero) and without user verification', async () => {
      const zero = p256Credential();
      await insertPasskeys(ctx.store.db, [
        {
          user_id: ada.id,
          org_id: 1,
          credential_id: zero.id,
          public_key: zero.cose,
          sign_count: 0,
          transports: '[]',
          label: 'Synced',
          aaguid: ZERO_AAGUID,
          backup_eligible: 1,
          backup_state: 1,
          mfa_verified: 0,
          created_at: clock,
          last_used_at: null,
        },
      ]);
      for (let i = 0; i < 2; i++) {
        const { challenge } = await webauthn.authenticationOptions('b1');
        const result = await webauthn.verifyAuthentication(signed(zero, challenge, 0, { flags: 0x01 }), 'b1', 'r');
        assert.equal(result.ok, true);
        assert.equal(result.ok && result.userVerified, false);
      }
    });

    it('requires the user handle, and it must name the credential owner', async () => {
      const { challenge } = await webauthn.authenticationOptions('b1');
      assert.deepEqual(await webauthn.verifyAuthentication(assertion(key, challenge, 50), 'b1', 'r'), {
        ok: false,
        reason: 'verification',
      });
      const foreign = await webauthn.authenticationOptions('b1');
      assert.deepEqual(
        await webauthn.verifyAuthentication(
          assertion(key, foreign.challenge, 50, { userHandle: 'not-a-user' }),
          'b1',
          'r',
        ),
        { ok: false, reason: 'verification' },
      );
      assert.equal(Number((await row()).sign_count), 6);
      const good = await webauthn.authenticationOptions('b1');
      assert.equal((await webauthn.verifyAuthentication(signed(key, good.challenge, 50), 'b1', 'r')).ok, true);
      assert.equal(Number((await row()).sign_count), 50);
      // a later use is not a first use
      const firstUses = await listAuditEvents(ctx.store.db, { action: 'passkey.first_use', after: 0 });
      assert.equal(firstUses.filter((e) => JSON.parse(e.passkey_ids).includes(passkeyId)).length, 1);
    });

    it('lets only one of two simultaneous assertions with the same counter through, and never lowers the counter', async () => {
      const regressions = async () =>
        (await listAuditEvents(ctx.store.db, {})).filter((e) => e.kind === 'passkey.counter_regression').length;
      const before = await regressions();
      const start = Number((await row()).sign_count);
      const [c1, c2] = [await webauthn.authenticationOptions('p1'), await webauthn.authenticationOptions('p2')];
      const same = await Promise.all([
        webauthn.verifyAuthentication(signed(key, c1.challenge, start + 1), 'p1', 'race-1'),
        webauthn.verifyAuthentication(signed(key, c2.challenge, start + 1), 'p2', 'race-2'),
      ]);
      assert.deepEqual(same.map((r) => r.ok).sort(), [false, true]);
      assert.deepEqual(
        same.find((r) => !r.ok),
        { ok: false, reason: 'counter_regression' },
      );
      assert.equal(await regressions(), before + 1);
      assert.equal(Number((await row()).sign_count), start + 1);
      const [c3, c4] = [await webauthn.authenticationOptions('p1'), await webauthn.authenticationOptions('p2')];
      await Promise.all([
        webauthn.verifyAuthentication(signed(key, c3.challenge, start + 100), 'p1', 'race-3'),
        webauthn.verifyAuthentication(signed(key, c4.challenge, start + 10), 'p2', 'race-4'),
      ]);
      assert.equal(Number((await row()).sign_count), start + 100, 'the stored counter never goes backwards');
    });

    it('refuses malformed responses without touching the challenge store', async () => {
      for (const input of [
        undefined,
        '',
        '{',
        '[]',
        '{"type":"public-key"}',
        'x'.repeat(300_000),
        { id: 'a', rawId: 'b', type: 'public-key', response: {} },
        {
          id: '!!',
          rawId: '!!',
          type: 'public-key',
          response: { clientDataJSON: 'a', authenticatorData: 'a', signature: 'a' },
        },
      ]) {
        assert.deepEqual(await webauthn.verifyAuthentication(input, 'b1', 'r'), { ok: false, reason: 'malformed' });
        assert.deepEqual(await webauthn.verifyRegistration(ada, input, 'b1'), { ok: false, reason: 'malformed' });
      }
    });

    it('registers a passkey with every field, labelled with the authenticator name, once', async () => {
      const fresh = p256Credential();
      const { challenge } = await webauthn.registrationOptions(bob, [], 'reg-bob');
      const response = attestation(fresh, challenge, GOOGLE_PM);
      const result = await webauthn.verifyRegistration(bob, JSON.stringify(response), 'reg-bob');
      assert.equal(result.ok, true);
      assert.equal(result.ok && result.label, 'Google Password Manager');
      const [stored] = await listUserCredentials(ctx.store.db, bob.id);
      assert.ok(stored);
      assert.deepEqual(Buffer.from(stored.credential_id), fresh.id);
      assert.deepEqual(Buffer.from(stored.public_key), fresh.cose);
      assert.equal(stored.aaguid, GOOGLE_PM);
      assert.equal(stored.mfa_verified, 1);
      assert.equal(stored.backup_eligible, 1);
      assert.equal(stored.backup_state, 1);
      assert.equal(Number(stored.sign_count), 0);
      assert.deepEqual(JSON.parse(stored.transports), ['internal']);
      assert.equal(stored.created_at, clock);
      assert.equal(stored.last_used_at, null);
      assert.equal(stored.org_id, 1);
      assert.ok(
        (await listAuditEvents(ctx.store.db, {})).some(
          (e) => e.kind === 'passkey.register' && e.eppn === 'bob@example.org',
        ),
      );
      const again = await webauthn.registrationOptions(bob, [], 'reg-bob');
      assert.deepEqual(
        await webauthn.verifyRegistration(bob, attestation(fresh, again.challenge, GOOGLE_PM), 'reg-bob'),
        { ok: false, reason: 'already_registered' },
      );
      assert.equal((await listUserCredentials(ctx.store.db, bob.id)).length, 1);
    });

    it('refuses a registration challenge issued to another user, and labels unknown authenticators plainly', async () => {
      const forAda = await webauthn.registrationOptions(ada, [], 'shared');
      assert.deepEqual(
        await webauthn.verifyRegistration(bob, attestation(p256Credential(), forAda.challenge, ZERO_AAGUID), 'shared'),
        { ok: false, reason: 'challenge' },
      );
      const plain = await webauthn.registrationOptions(bob, [], 'reg-bob');
      const result = await webauthn.verifyRegistration(
        bob,
        attestation(p256Credential(), plain.challenge, ZERO_AAGUID, 0x41),
        'reg-bob',
      );
      assert.equal(result.ok && result.label, 'Passkey');
      const stored = (await listUserCredentials(ctx.store.db, bob.id)).at(-1)!;
      assert.equal(stored.aaguid, ZERO_AAGUID);
      assert.equal(stored.mfa_verified, 0);
      assert.equal(stored.backup_eligible, 0);
      // An unknown authenticator is named after the browser and platform it was registered in.
      const firefox = await webauthn.registrationOptions(bob, [], 'reg-bob');
      const ua = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0';
      const named = await webauthn.verifyRegistration(
        bob,
        attestation(p256Credential(), firefox.challenge, ZERO_AAGUID),
        'reg-bob',
        { userAgent: ua },
      );
      assert.equal(named.ok && named.label, 'Firefox on Windows');
      // A known authenticator keeps its model name whatever the browser.
      const known = await webauthn.registrationOptions(bob, [], 'reg-bob');
      const model = await webauthn.verifyRegistration(
        bob,
        attestation(p256Credential(), known.challenge, GOOGLE_PM),
        'reg-bob',
        { userAgent: ua },
      );
      assert.equal(model.ok && model.label, 'Google Password Manager');
    });
  });
}

describe('authenticator names', () => {
  it('come from the shipped AAGUID list; all-zero and unknown AAGUIDs have none', () => {
    assert.equal(authenticatorName(GOOGLE_PM), 'Google Password Manager');
    assert.equal(authenticatorName(GOOGLE_PM.toUpperCase()), 'Google Password Manager');
    assert.equal(authenticatorName(ZERO_AAGUID), undefined);
    assert.equal(authenticatorName('12345678-1234-1234-1234-123456789abc'), undefined);
  });
});
