// SCIM's password extension: a provisioning client carries a user's existing password hash on
// create and replace (and PATCH); it is checked like an import's, never returned, and given only
// to a user who has neither a password nor a passkey.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedUser } from '../helpers.ts';
import { PASSWORD_USER, PATCH_OP, USER, scimKit, type ScimKit } from './scim-kit.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { verifyPassword } from '../../src/directory/passwords.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { independentHashes, passlibMissing } from '../directory/imported-hashes.ts';

const PASSWORD = 'carried over 123';

for (const dialect of dialects()) {
  describe(`SCIM: users with an existing password hash (${dialect})`, { skip: passlibMissing }, () => {
    let k: ScimKit;
    const hashes = passlibMissing ? {} : independentHashes(PASSWORD);
    const stored = async (eppn: string) => (await findUserByEppn(k.ctx.store.db, eppn))?.password_hash ?? null;
    const user = (userName: string, hash?: unknown) => ({
      schemas: [USER, PASSWORD_USER],
      userName,
      name: { givenName: 'Pat', familyName: 'Smith' },
      ...(hash === undefined ? {} : { [PASSWORD_USER]: { passwordHash: hash } }),
    });
    before(async () => {
      k = await scimKit(dialect);
    });
    after(() => k?.close());

    it('create keeps the hash, answers and reads back without it; the password verifies', async () => {
      const r = await k.call('POST', '/Users', user('pat@example.org', hashes.django_pbkdf2_sha256));
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.ok(!JSON.stringify(r.body).includes(hashes.django_pbkdf2_sha256!.split('$')[3]!));
      assert.equal(r.body[PASSWORD_USER], undefined);
      assert.ok(!r.body.schemas.includes(PASSWORD_USER));
      const asked = await k.call('GET', `/Users/${r.body.id}?attributes=userName,${PASSWORD_USER}:passwordHash`);
      assert.equal(asked.status, 200);
      assert.equal(asked.body[PASSWORD_USER], undefined, 'returned: never');
      assert.equal(await stored('pat@example.org'), hashes.django_pbkdf2_sha256);
      assert.equal((await verifyPassword(PASSWORD, await stored('pat@example.org'))).valid, true);
      const [audit] = await listAuditEvents(k.ctx.store.db, { action: 'password.set', after: 0 });
      assert.deepEqual(JSON.parse(audit!.details), { imported: true });
    });

    it('an unknown format or a cost beyond the bound is invalidValue, without the hash in the answer', async () => {
      for (const [hash, reason] of [
        ['$1$saltsalt$abcdefghijklmnopqrstuv', /passwordHash is in no accepted format/],
        [`$2b$15$${'q'.repeat(53)}`, /passwordHash bcrypt cost 15 is not within 4-12/],
        [42, /passwordHash must be a string/],
      ] as const) {
        const r = await k.call('POST', '/Users', user('bad@example.org', hash));
        assert.equal(r.status, 400);
        assert.equal(r.body.scimType, 'invalidValue');
        assert.match(r.body.detail, reason);
        assert.ok(!JSON.stringify(r.body).includes('abcdefghijklmnop') && !JSON.stringify(r.body).includes('qqqq'));
      }
      assert.equal(await findUserByEppn(k.ctx.store.db, 'bad@example.org'), undefined);
    });

    it('replace gives a hash to a user without password, and never replaces one they have', async () => {
      const created = await k.call('POST', '/Users', user('lee@example.org'));
      assert.equal(await stored('lee@example.org'), null);
      const put = await k.call('PUT', `/Users/${created.body.id}`, user('lee@example.org', hashes.bcrypt_2y));
      assert.equal(put.status, 200);
      assert.equal(put.body[PASSWORD_USER], undefined);
      assert.equal(await stored('lee@example.org'), hashes.bcrypt_2y);
      await k.call('PUT', `/Users/${created.body.id}`, user('lee@example.org', hashes.scrypt));
      assert.equal(await stored('lee@example.org'), hashes.bcrypt_2y, 'the first hash stays');
      await seedUser(k.ctx, 1, 'own@example.org', { password: 'a password of their own' });
      const own = await stored('own@example.org');
      const found = await k.call('GET', `/Users?filter=${encodeURIComponent('userName eq "own@example.org"')}`);
      const id = found.body.Resources[0].id;
      assert.equal((await k.call('PUT', `/Users/${id}`, user('own@example.org', hashes.bcrypt_2b))).status, 200);
      assert.equal(await stored('own@example.org'), own);
    });

    it('PATCH may add the hash; it is checked the same way', async () => {
      const created = await k.call('POST', '/Users', user('kim@example.org'));
      const bad = await k.call('PATCH', `/Users/${created.body.id}`, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'add', path: `${PASSWORD_USER}:passwordHash`, value: '{MD5}abc' }],
      });
      assert.equal(bad.status, 400);
      const ok = await k.call('PATCH', `/Users/${created.body.id}`, {
        schemas: [PATCH_OP],
        Operations: [{ op: 'add', path: `${PASSWORD_USER}:passwordHash`, value: hashes.ldap_salted_sha1 }],
      });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.equal(ok.body[PASSWORD_USER], undefined);
      assert.equal(await stored('kim@example.org'), hashes.ldap_salted_sha1);
    });
  });
}
