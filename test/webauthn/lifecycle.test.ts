// The passkey lifecycle below the pages: the organization's authenticator policy at registration,
// FIDO metadata statuses, recovery links (one use, even under concurrency), password removal, and
// what a sign-in proves (amr, acr).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, seedOrg, seedUser, p256Credential, cli, type TestContext } from '../helpers.ts';
import { attestation } from '../authenticator.ts';
import { createWebAuthn, type WebAuthn } from '../../src/webauthn/ceremonies.ts';
import { setPasskeyPolicy, DEFAULT_POLICY, policyRefusal } from '../../src/webauthn/policy.ts';
import { upsertMdsAuthenticators } from '../../src/store/mds.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findUserById, type User } from '../../src/store/directory.ts';
import { removePassword } from '../../src/directory/index.ts';
import {
  createRecoveryLink,
  openRecoveryLink,
  recoveryLinks,
  revokeLink,
  useRecoveryLink,
} from '../../src/webauthn/recovery-links.ts';
import {
  ACR_BASELINE,
  ACR_HARDWARE,
  ACR_MFA,
  acrFor,
  acrSatisfies,
  amrForPasskey,
  requiresUserVerification,
} from '../../src/oauth/authentication-context.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';

const YUBIKEY = 'cb69481e-8ff7-4039-93ec-0a2729a154a8';
const GOOGLE_PM = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';
// flags: UP 0x01, UV 0x04, BE 0x08, BS 0x10, AT 0x40
const DEVICE_BOUND_UV = 0x45;
const SYNCED_UV = 0x45 | 0x08 | 0x10;
const DEVICE_BOUND_NO_UV = 0x41;

describe('what a passkey sign-in proves', () => {
  it('amr: hwk or swk and user always, mfa with user verification', () => {
    assert.deepEqual(amrForPasskey({ userVerified: true, backupEligible: false }), ['hwk', 'user', 'mfa']);
    assert.deepEqual(amrForPasskey({ userVerified: false, backupEligible: true }), ['swk', 'user']);
  });
  it('acr: the strongest class asked for and reached, else phr for a passkey and the baseline for a password', () => {
    const hwk = ['hwk', 'user', 'mfa'];
    assert.equal(acrFor(hwk), 'phr');
    assert.equal(acrFor(hwk, { asked: [ACR_MFA] }), ACR_MFA);
    assert.equal(acrFor(hwk, { asked: [ACR_HARDWARE] }), 'phr', 'AAL3 needs an attested authenticator');
    assert.equal(acrFor(hwk, { attested: true, asked: [ACR_HARDWARE, ACR_MFA] }), ACR_HARDWARE);
    assert.equal(acrFor(['swk', 'user', 'mfa'], { attested: true, asked: [ACR_HARDWARE] }), 'phr', 'synced: not AAL3');
    assert.equal(acrFor(['hwk', 'user'], { asked: [ACR_MFA] }), 'phr', 'no user verification: not MFA');
    assert.equal(acrFor(['pwd'], { asked: ['phr'] }), ACR_BASELINE);
  });
  it('a recorded class satisfies requests for it and for weaker ones only', () => {
    assert.equal(acrSatisfies(ACR_HARDWARE, ['phr']), true);
    assert.equal(acrSatisfies(ACR_MFA, [ACR_BASELINE]), true);
    assert.equal(acrSatisfies('phr', [ACR_MFA]), false);
    assert.equal(acrSatisfies(ACR_BASELINE, ['phr']), false);
    assert.equal(acrSatisfies(undefined, [ACR_BASELINE]), false);
  });
  it('asks the authenticator to verify the user only when every class asked for needs it', () => {
    assert.equal(requiresUserVerification([ACR_MFA]), true);
    assert.equal(requiresUserVerification([ACR_HARDWARE, ACR_MFA]), true);
    assert.equal(requiresUserVerification([ACR_MFA, 'phr']), false);
    assert.equal(requiresUserVerification([]), false);
  });
});

describe('authenticator policy (unit)', () => {
  const credential = { aaguid: YUBIKEY, backupEligible: false, userVerified: true };
  it('deny wins, an allow list admits only its AAGUIDs (never the all-zero one)', () => {
    assert.equal(policyRefusal(DEFAULT_POLICY, credential), undefined);
    assert.equal(policyRefusal({ ...DEFAULT_POLICY, denyAaguids: [YUBIKEY] }, credential), 'policy_authenticator');
    const allow = { ...DEFAULT_POLICY, allowAaguids: [YUBIKEY] };
    assert.equal(policyRefusal(allow, credential), undefined);
    assert.equal(policyRefusal(allow, { ...credential, aaguid: GOOGLE_PM }), 'policy_authenticator');
    assert.equal(policyRefusal(allow, { ...credential, aaguid: ZERO_AAGUID }), 'policy_authenticator');
  });
  it('device-bound and user verification requirements', () => {
    const strict = { ...DEFAULT_POLICY, requireDeviceBound: true, requireUv: true };
    assert.equal(policyRefusal(strict, { ...credential, backupEligible: true }), 'policy_device_bound');
    assert.equal(policyRefusal(strict, { ...credential, userVerified: false }), 'policy_user_verification');
    assert.equal(policyRefusal(strict, credential), undefined);
  });
});

for (const dialect of dialects()) {
  describe(`passkey lifecycle (${dialect})`, () => {
    let ctx: TestContext;
    let webauthn: WebAuthn;
    let ada: User;
    let bob: User;
    let n = 0;

    before(async () => {
      ctx = await startTestApp(dialect, { WEBAUTHN_REGISTRATION_HINTS: 'security-key,hybrid' });
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      ada = await seedUser(ctx, 1, 'ada@example.org', { password: 'correct horse battery' });
      bob = await seedUser(ctx, 2, 'bob@other.org');
      webauthn = createWebAuthn(ctx.config, ctx.store);
    });
    after(() => ctx.close());

    /** Registers a fresh credential for user with these authenticator flags and AAGUID. */
    async function register(user: User, aaguid: string, flags: number, within?: Parameters<typeof useRecoveryLink>) {
      const binding = `test-${++n}`;
      const { challenge } = await webauthn.registrationOptions(user, [], binding);
      const response = attestation(p256Credential(), challenge, aaguid, flags);
      return webauthn.verifyRegistration(user, JSON.stringify(response), binding, {
        within: within ? useRecoveryLink(...within) : undefined,
      });
    }

    it('the options follow the policy and the configured hints', async () => {
      await setPasskeyPolicy(ctx.store, 2, { ...DEFAULT_POLICY, requireUv: true, attestation: 'direct' });
      const options = await webauthn.registrationOptions(bob, [], 'opts');
      assert.equal(options.attestation, 'direct');
      assert.equal(options.authenticatorSelection?.userVerification, 'required');
      assert.deepEqual(options.hints, ['security-key', 'hybrid']);
      const relaxed = await webauthn.registrationOptions(ada, [], 'opts-ada');
      assert.equal(relaxed.attestation, 'none');
      assert.equal(relaxed.authenticatorSelection?.userVerification, 'preferred');
    });

    it('refuses what the policy refuses, and stores nothing', async () => {
      await setPasskeyPolicy(ctx.store, 2, {
        ...DEFAULT_POLICY,
        denyAaguids: [GOOGLE_PM],
        requireDeviceBound: true,
        requireUv: true,
      });
      assert.deepEqual(await register(bob, GOOGLE_PM, DEVICE_BOUND_UV), { ok: false, reason: 'policy_authenticator' });
      assert.deepEqual(await register(bob, YUBIKEY, SYNCED_UV), { ok: false, reason: 'policy_device_bound' });
      assert.equal((await register(bob, YUBIKEY, DEVICE_BOUND_NO_UV)).ok, false, 'user verification required');
      assert.equal((await listUserCredentials(ctx.store.db, bob.id)).length, 0);
      const ok = await register(bob, YUBIKEY, DEVICE_BOUND_UV);
      assert.equal(ok.ok, true);
      await setPasskeyPolicy(ctx.store, 2, { ...DEFAULT_POLICY, allowAaguids: [GOOGLE_PM] });
      assert.deepEqual(await register(bob, YUBIKEY, DEVICE_BOUND_UV), { ok: false, reason: 'policy_authenticator' });
      await setPasskeyPolicy(ctx.store, 2, DEFAULT_POLICY);
      const audit = await listAuditEvents(ctx.store.db, { action: 'org.policy' });
      assert.ok(audit.length >= 4 && audit.every((a) => a.org_id === 2));
    });

    it('refuses an authenticator model the imported metadata reports compromised', async () => {
      await upsertMdsAuthenticators(ctx.store.db, [
        {
          aaguid: YUBIKEY,
          description: 'Test key',
          status: 'USER_KEY_PHYSICAL_COMPROMISE',
          status_date: '2026-01-01',
          icon: null,
          statement: '{}',
          updated_at: Date.now(),
        },
      ]);
      try {
        const before = (await listUserCredentials(ctx.store.db, ada.id)).length;
        assert.deepEqual(await register(ada, YUBIKEY, DEVICE_BOUND_UV), {
          ok: false,
          reason: 'authenticator_compromised',
        });
        assert.equal((await listUserCredentials(ctx.store.db, ada.id)).length, before);
      } finally {
        await ctx.store.db.deleteFrom('mds_authenticators').execute();
      }
    });

    it('a recovery link works once, shown once, stored as a hash, audited on creation and use', async () => {
      const first = await register(ada, GOOGLE_PM, SYNCED_UV);
      assert.equal(first.ok, true);
      const link = await createRecoveryLink(ctx.store, ctx.config.publicUrl, {
        eppn: 'Ada@Example.org',
        deleteOthers: true,
      });
      assert.ok(link.url.startsWith(`${ctx.config.publicUrl}/recover/`));
      const token = link.url.split('/').pop()!;
      const stored = await ctx.store.db.selectFrom('recovery_links').selectAll().execute();
      assert.ok(stored.every((r) => r.token_hash !== token && !JSON.stringify(r).includes(token)));
      const opened = await openRecoveryLink(ctx.store, token, Date.now());
      assert.ok(opened);
      const actor = { type: 'user' as const, id: ada.eppn };
      const used = await register(ada, YUBIKEY, DEVICE_BOUND_UV, [
        opened.link,
        opened.user,
        { actor, now: Date.now() },
      ]);
      assert.equal(used.ok, true);
      const passkeys = await listUserCredentials(ctx.store.db, ada.id);
      assert.deepEqual(
        passkeys.map((p) => p.aaguid),
        [YUBIKEY],
        'the other passkeys went',
      );
      assert.equal(await openRecoveryLink(ctx.store, token, Date.now()), undefined, 'used up');
      const again = await register(ada, YUBIKEY, DEVICE_BOUND_UV, [
        opened.link,
        opened.user,
        { actor, now: Date.now() },
      ]);
      assert.deepEqual(again, { ok: false, reason: 'link_used' });
      assert.equal((await listUserCredentials(ctx.store.db, ada.id)).length, 1, 'nothing stored by the refused use');
      const kinds = (await listAuditEvents(ctx.store.db, {}))
        .filter((a) => a.eppn === 'ada@example.org')
        .map((a) => a.kind);
      for (const kind of ['recovery_link.create', 'recovery_link.use', 'passkey.delete_user'])
        assert.ok(kinds.includes(kind), kind);
      const events = await ctx.store.db.selectFrom('events').select('type').execute();
      for (const type of ['recovery_link.created', 'recovery_link.used'])
        assert.ok(
          events.some((e) => e.type === type),
          type,
        );
      const [listed] = await recoveryLinks(ctx.store, { eppn: 'ada@example.org' });
      assert.equal(listed?.state, 'used');
    });

    it('of eight simultaneous uses of one link exactly one registers a passkey', async () => {
      const link = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: 'bob@other.org' });
      const opened = (await openRecoveryLink(ctx.store, link.url.split('/').pop()!, Date.now()))!;
      const before = (await listUserCredentials(ctx.store.db, bob.id)).length;
      const actor = { type: 'user' as const, id: bob.eppn };
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          register(bob, YUBIKEY, DEVICE_BOUND_UV, [opened.link, opened.user, { actor, now: Date.now() }]),
        ),
      );
      assert.equal(results.filter((r) => r.ok).length, 1);
      assert.ok(results.filter((r) => !r.ok).every((r) => !r.ok && r.reason === 'link_used'));
      assert.equal((await listUserCredentials(ctx.store.db, bob.id)).length, before + 1);
    });

    it('revoked and expired links cannot be opened; bad input is refused', async () => {
      const revoked = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: 'bob@other.org' });
      await revokeLink(ctx.store, revoked.id);
      assert.equal(await openRecoveryLink(ctx.store, revoked.url.split('/').pop()!, Date.now()), undefined);
      await assert.rejects(revokeLink(ctx.store, revoked.id), /can no longer be used/);
      const short = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: 'bob@other.org', ttlMs: 60_000 });
      const token = short.url.split('/').pop()!;
      assert.ok(await openRecoveryLink(ctx.store, token, Date.now()));
      assert.equal(await openRecoveryLink(ctx.store, token, Date.now() + 61_000), undefined, 'expired');
      assert.equal(await openRecoveryLink(ctx.store, 'not-a-token', Date.now()), undefined);
      await assert.rejects(createRecoveryLink(ctx.store, '', { eppn: 'nobody@example.org' }), /does not exist/);
      await assert.rejects(createRecoveryLink(ctx.store, '', { eppn: 'bob@other.org', ttlMs: 1000 }), /between/);
    });

    it('removes a password only from a user with a passkey, audited', async () => {
      const carol = await seedUser(ctx, 1, 'carol@example.org', { password: 'correct horse battery' });
      await assert.rejects(removePassword(ctx.store, carol.id), /has no passkey/);
      assert.notEqual((await findUserById(ctx.store.db, carol.id))?.password_hash, null);
      assert.equal((await register(carol, GOOGLE_PM, SYNCED_UV)).ok, true);
      await removePassword(ctx.store, carol.id);
      assert.equal((await findUserById(ctx.store.db, carol.id))?.password_hash, null);
      const listed = JSON.parse((await cli(ctx.config.databaseUrl, ['user', 'list', '--org', '1', '--json'])).out) as {
        eppn: string;
        has_password: boolean;
      }[];
      assert.equal(listed.find((u) => u.eppn === 'carol@example.org')?.has_password, false);
      assert.equal(listed.find((u) => u.eppn === 'ada@example.org')?.has_password, true);
      const events = await ctx.store.db
        .selectFrom('events')
        .select(['type', 'data'])
        .where('subject', '=', 'carol@example.org')
        .where('type', '=', 'password.changed')
        .execute();
      assert.equal(events.length, 2, 'the password set, then removed');
      assert.equal((JSON.parse(events.at(-1)!.data) as { change?: string }).change, 'delete');
      const audit = await listAuditEvents(ctx.store.db, { action: 'password.remove' });
      assert.deepEqual(
        audit.map((a) => a.eppn),
        ['carol@example.org'],
      );
    });
  });
}
