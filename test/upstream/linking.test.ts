// The linking rules against a real store (SQLite and PostgreSQL): which account an upstream
// identity signs in to, and what is refused: a username from an address outside the realm,
// an identity whose secondary id another account holds, non-ASCII eppn and addresses, two
// accounts with one address, an account with a staff role, and a user import that would merge
// a directory line into an account an upstream sign-in made.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { addUpstreamProvider, loadUpstreamProvider, type UpstreamInput } from '../../src/upstream/providers.ts';
import { resolveAccount } from '../../src/upstream/linking.ts';
import { findUserByEppn, insertUserId } from '../../src/store/directory.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { forgedIdp, type ForgedIdp } from './saml-forge.ts';
import { importUsers } from '../../src/directory/user-import.ts';

for (const dialect of dialects()) {
  describe(`upstream linking rules (${dialect})`, () => {
    let ctx: TestContext;
    let n = 0;
    let member: ForgedIdp;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      member = await forgedIdp('https://idp.member.test/idp');
    });
    after(async () => ctx?.close());

    async function provider(input: Partial<UpstreamInput> = {}) {
      n += 1;
      const added = await addUpstreamProvider(ctx.store, ctx.keys, {
        orgId: 1,
        type: 'oidc',
        name: `IdP ${n}`,
        issuer: `https://idp${n}.upstream.test`,
        clientId: 'c',
        clientSecret: 'upstream-client-secret-0123456789',
        ...input,
      });
      return loadUpstreamProvider(ctx.store, added.id);
    }

    const resolve = (p: Awaited<ReturnType<typeof provider>>, subject: string, attributes: Record<string, string>) =>
      resolveAccount(ctx.store, p, { providerId: p.id, subject, attributes, amr: [] });

    async function lastRefusal() {
      const rows = await ctx.store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'upstream.refused')
        .orderBy('id', 'desc')
        .limit(1)
        .execute();
      return JSON.parse(rows[0]!.details as string).reason as string;
    }

    it('names a new account after a verified address only when it is in the realm', async () => {
      const p = await provider({ createUsers: true });
      const outside = await resolve(p, 'squatter', { email: 'president@gmail.com', email_verified: 'true' });
      assert.ok(outside.ok);
      assert.match(outside.user.eppn, /^u[0-9a-f]{16}@example\.org$/);
      assert.equal(await findUserByEppn(ctx.store.db, 'president@example.org'), undefined);
      const inside = await resolve(p, 'staffer', { email: 'Carol@EXAMPLE.org', email_verified: 'true' });
      assert.ok(inside.ok);
      assert.equal(inside.user.eppn, 'carol@example.org');
    });

    it('refuses non-ASCII eppn and addresses: a Kelvin sign never becomes a k', async () => {
      await seedUser(ctx, 1, 'kim@example.org', { email: 'kim@example.org' });
      const byEppn = await provider({ linkBy: 'eppn' });
      const kelvin = await resolve(byEppn, 'k1', { eppn: '\u212aim@example.org' });
      assert.equal(kelvin.ok, false);
      const byEmail = await provider({ linkBy: 'email' });
      const mail = await resolve(byEmail, 'k2', { email: '\u212aim@example.org', email_verified: 'true' });
      assert.equal(mail.ok, false);
      const created = await resolve(await provider({ createUsers: true }), 'k3', {
        eppn: '\u212aim@example.org',
        email: '\u212aim@example.org',
        email_verified: 'true',
      });
      assert.ok(created.ok);
      assert.notEqual(created.user.eppn, 'kim@example.org');
      assert.ok(!created.user.email);
    });

    it('refuses a secondary id another account holds, with an audit record, instead of skipping it', async () => {
      const victim = await seedUser(ctx, 1, 'victim@example.org');
      const row = (await findUserByEppn(ctx.store.db, victim.eppn))!;
      await insertUserId(ctx.store.db, row.id, 'edugain', 'shared-subject');
      await seedUser(ctx, 1, 'other@example.org');
      // a member IdP of the federation (edugain is for SAML providers)
      const federated = (input: Partial<UpstreamInput>) =>
        provider({ type: 'saml', saml: { entityId: member.entityId, metadataXml: member.metadata }, ...input });
      const p = await federated({ linkBy: 'eppn', namespace: 'edugain' });
      const out = await resolve(p, 'shared-subject', { eppn: 'other@example.org' });
      assert.deepEqual([out.ok, !out.ok && out.reason], [false, 'identity_linked_elsewhere']);
      assert.equal(await lastRefusal(), 'secondary_id_taken');
      const created = await resolve(await federated({ createUsers: true, namespace: 'edugain' }), 'shared-subject', {});
      assert.equal(created.ok, false, 'no account is made for it either');
      const own = await resolve(p, 'shared-subject', { eppn: 'victim@example.org' });
      assert.ok(own.ok, 'the holder itself links');
    });

    it('links by e-mail only a unique account without a staff role', async () => {
      await seedUser(ctx, 1, 'twin1@example.org', { email: 'twins@mail.example' });
      await seedUser(ctx, 1, 'twin2@example.org', { email: 'twins@mail.example' });
      const p = await provider({ linkBy: 'email' });
      const twins = await resolve(p, 't', { email: 'twins@mail.example', email_verified: 'true' });
      assert.equal(twins.ok, false);
      assert.equal(await lastRefusal(), 'ambiguous_email');
      await seedUser(ctx, 1, 'admin@example.org', { email: 'admin@mail.example' });
      await grantRole(ctx.store, { eppn: 'admin@example.org', role: 'org-admin', orgId: 1 });
      const staff = await resolve(p, 'a', { email: 'admin@mail.example', email_verified: 'true' });
      assert.equal(staff.ok, false);
      assert.equal(await lastRefusal(), 'staff_account');
      await seedUser(ctx, 1, 'plain@example.org', { email: 'plain@mail.example' });
      const plain = await resolve(p, 'pl', { email: 'plain@mail.example', email_verified: 'true' });
      assert.ok(plain.ok);
      assert.equal(plain.user.eppn, 'plain@example.org');
    });

    it('a user import does not merge a line into an account an upstream sign-in made', async () => {
      const p = await provider({ createUsers: true });
      const made = await resolve(p, 'jit', { email: 'dana@example.org', email_verified: 'true' });
      assert.ok(made.ok);
      assert.equal(made.user.eppn, 'dana@example.org');
      const dir = mkdtempSync(join(tmpdir(), 'link-import-'));
      const file = join(dir, 'users.csv');
      writeFileSync(file, 'eppn,name,external_id\ndana@example.org,Dana Real,hr-1\nnew@example.org,New,hr-2\n');
      const summary = await importUsers(ctx.store, { orgId: 1, file });
      assert.equal(summary.rejected, 1);
      assert.equal(summary.created, 1);
      assert.match(summary.rejections[0]!.error, /linked to an upstream identity/);
      assert.equal((await findUserByEppn(ctx.store.db, 'dana@example.org'))!.external_id, null);
    });
  });
}
