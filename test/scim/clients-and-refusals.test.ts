// The request sequences Entra ID and Okta send, the two credentials (provisioning token, client
// credentials), what deactivation does, and the input SCIM must refuse, on both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { clientToken, dialects, seedClient } from '../helpers.ts';
import { EDU_GROUP, GROUP, PATCH_OP, USER, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { listScimTokens, revokeScimToken } from '../../src/directory/provisioning.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { setPasskeyPolicy, loadPolicy } from '../../src/webauthn/policy.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';
import { coseP256PublicKey } from '../helpers.ts';

const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });

async function auditKinds(k: ScimKit, actor: string) {
  const rows = await k.ctx.store.db
    .selectFrom('audit_events')
    .selectAll()
    .where('actor', '=', actor)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ kind: r.kind, actorType: r.actor_type }));
}

for (const dialect of dialects()) {
  describe(`SCIM clients and refusals (${dialect})`, () => {
    let k: ScimKit;
    before(async () => {
      k = await scimKit(dialect);
    });
    after(() => k.close());

    it('Entra ID: probe by filter, create, PATCH several attributes, deactivate, group membership, delete', async () => {
      const probe = await k.call('GET', `/Users?filter=${encodeURIComponent('userName eq "ENTRA@example.org"')}`);
      assert.equal(probe.body.totalResults, 0);
      const created = await k.call('POST', '/Users', newUser('entra', { active: true }));
      assert.equal(created.status, 201);
      const id = created.body.id;
      let r = await k.call(
        'PATCH',
        `/Users/${id}`,
        patch(
          { op: 'Replace', path: 'displayName', value: 'Entra U.' },
          { op: 'Replace', path: 'name.givenName', value: 'Entra' },
          { op: 'Replace', path: 'emails[type eq "work"].value', value: 'entra.u@example.org' },
          {
            op: 'Add',
            path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber',
            value: '4711',
          },
        ),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.emails[0].value, 'entra.u@example.org');
      const group = await k.call('POST', '/Groups', { schemas: [GROUP], displayName: 'Staff', externalId: 'entra-g' });
      assert.equal(group.status, 201);
      r = await k.call(
        'PATCH',
        `/Groups/${group.body.id}`,
        patch({ op: 'Add', path: 'members', value: [{ value: id }] }),
      );
      assert.equal(r.body.members[0].value, id);
      r = await k.call(
        'PATCH',
        `/Groups/${group.body.id}`,
        patch({ op: 'Remove', path: 'members', value: [{ value: id }] }),
      );
      assert.equal(r.body.members, undefined);
      r = await k.call('PATCH', `/Users/${id}`, patch({ op: 'Replace', path: 'active', value: 'False' }));
      assert.equal(r.body.active, false);
      const stored = await findUserByEppn(k.ctx.store.db, 'entra@example.org');
      assert.notEqual(stored!.disabled_at, null);
      assert.equal((await k.call('DELETE', `/Users/${id}`)).status, 204);
      const kinds = (await auditKinds(k, 'scim-token:1')).map((a) => a.kind);
      for (const kind of ['user.add', 'user.update', 'group.add', 'group.update', 'user.disable', 'user.remove'])
        assert.ok(kinds.includes(kind), `${kind} in ${kinds.join(',')}`);
      assert.ok((await auditKinds(k, 'scim-token:1')).every((a) => a.actorType === 'provisioning'));
    });

    it('Okta: create, path-less replace, group with members by value path removal, deactivate and reactivate', async () => {
      const created = await k.call('POST', '/Users', newUser('okta'));
      const id = created.body.id;
      let r = await k.call('PATCH', `/Users/${id}`, patch({ op: 'replace', value: { active: false } }));
      assert.equal(r.body.active, false);
      r = await k.call('PUT', `/Users/${id}`, {
        ...newUser('okta'),
        active: true,
        name: { givenName: 'Ok', familyName: 'Ta' },
      });
      assert.equal(r.body.active, true);
      const other = await k.call('POST', '/Users', newUser('okta2'));
      const group = await k.call('POST', '/Groups', {
        schemas: [GROUP, EDU_GROUP],
        displayName: 'Maths 10',
        members: [{ value: id, display: 'okta@example.org' }, { value: other.body.id }],
        [EDU_GROUP]: { type: 'teaching-group' },
      });
      r = await k.call(
        'PATCH',
        `/Groups/${group.body.id}`,
        patch({ op: 'remove', path: `members[value eq "${other.body.id}"]` }),
      );
      assert.deepEqual(
        r.body.members.map((m: any) => m.value),
        [id],
      );
      r = await k.call(
        'PATCH',
        `/Groups/${group.body.id}`,
        patch({ op: 'replace', value: { id: group.body.id, displayName: 'Maths 10A' } }),
      );
      assert.equal(r.body.displayName, 'Maths 10A');
      r = await k.call('PUT', `/Groups/${group.body.id}`, { schemas: [GROUP], displayName: 'Maths 10', members: [] });
      assert.equal(r.body.members, undefined);
    });

    it('a client_credentials token with scope scim from a client granted one organization provisions it', async () => {
      const client = await seedClient(k.ctx, { scopes: ['scim'], orgs: [1] });
      const token = await clientToken(k.ctx, client.clientId, client.secret, 'scim');
      const r = await k.call('POST', '/Users', newUser('viaclient'), {}, token);
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.deepEqual(
        (await auditKinds(k, client.clientId)).map((a) => a.kind),
        ['user.add'],
        'created with its directory attributes in one transaction, one record',
      );
      const two = await seedClient(k.ctx, { scopes: ['scim'], orgs: [1, 2] });
      const twoToken = await clientToken(k.ctx, two.clientId, two.secret, 'scim');
      assert.equal((await k.call('GET', '/Users', undefined, {}, twoToken)).status, 403);
      const wrongScope = await seedClient(k.ctx, { scopes: ['report.read'], orgs: [1] });
      const wrong = await clientToken(k.ctx, wrongScope.clientId, wrongScope.secret, 'report.read');
      assert.equal((await k.call('GET', '/Users', undefined, {}, wrong)).status, 401);
    });

    it('each token sees its own organization only; a revoked token stops at once; last use recorded', async () => {
      const mine = await k.call('POST', '/Users', newUser('own'));
      const seenByOther = await k.call('GET', `/Users/${mine.body.id}`, undefined, {}, k.otherToken);
      assert.equal(seenByOther.status, 404);
      const list = await k.call('GET', '/Users', undefined, {}, k.otherToken);
      assert.equal(list.body.totalResults, 0);
      const [token] = await listScimTokens(k.ctx.store, 2);
      assert.ok(token!.last_used_at);
      await revokeScimToken(k.ctx.store, token!.id);
      assert.equal((await k.call('GET', '/Users', undefined, {}, k.otherToken)).status, 401);
    });

    it('deactivation keeps passkeys by default and deletes them when the organization says so', async () => {
      const u = await k.call('POST', '/Users', newUser('keys'));
      const user = (await findUserByEppn(k.ctx.store.db, 'keys@example.org'))!;
      await insertPasskeys(k.ctx.store.db, [
        {
          user_id: user.id,
          org_id: 1,
          credential_id: Buffer.from('keys-1'),
          public_key: await coseP256PublicKey(),
          sign_count: 0,
          transports: '[]',
          label: 'Key',
          aaguid: '00000000-0000-0000-0000-000000000000',
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: Date.now(),
          last_used_at: null,
        },
      ]);
      await k.call('PATCH', `/Users/${u.body.id}`, patch({ op: 'replace', path: 'active', value: false }));
      assert.equal((await listUserCredentials(k.ctx.store.db, user.id)).length, 1);
      await k.call('PATCH', `/Users/${u.body.id}`, patch({ op: 'replace', path: 'active', value: true }));
      await setPasskeyPolicy(k.ctx.store, 1, { ...(await loadPolicy(k.ctx.store.db, 1)), onDeactivate: 'delete' });
      await k.call('PATCH', `/Users/${u.body.id}`, patch({ op: 'replace', path: 'active', value: false }));
      assert.equal((await listUserCredentials(k.ctx.store.db, user.id)).length, 0);
      await setPasskeyPolicy(k.ctx.store, 1, { ...(await loadPolicy(k.ctx.store.db, 1)), onDeactivate: 'keep' });
    });

    describe('refusals', () => {
      it("another organization's realm is refused like the passkey API refuses it", async () => {
        const r = await k.call('POST', '/Users', { schemas: [USER], userName: 'eve@other.org' });
        assert.equal(r.status, 403);
        assert.equal(r.body.detail, "eppn realm 'other.org' does not match organization");
      });
      it('a duplicate userName or externalId is 409 uniqueness', async () => {
        await k.call('POST', '/Users', newUser('dup'));
        const again = await k.call('POST', '/Users', newUser('dup', { externalId: 'other-ext' }));
        assert.equal(again.status, 409);
        assert.equal(again.body.scimType, 'uniqueness');
        const ext = await k.call('POST', '/Users', newUser('dup2', { externalId: 'ext-dup' }));
        assert.equal(ext.status, 409);
        assert.equal(ext.body.scimType, 'uniqueness');
      });
      it('a member of another organization is refused', async () => {
        const theirs = await k.call(
          'POST',
          '/Users',
          { schemas: [USER], userName: 'olav@other.org' },
          {},
          await freshOtherToken(k),
        );
        assert.equal(theirs.status, 201);
        const r = await k.call('POST', '/Groups', {
          schemas: [GROUP],
          displayName: 'Mixed',
          members: [{ value: theirs.body.id }],
        });
        assert.equal(r.status, 400);
        assert.equal(r.body.scimType, 'invalidValue');
      });
      it('bad values: attributes the directory rules refuse are 400 invalidValue', async () => {
        for (const body of [
          newUser('bad1', { emails: [{ value: 'not-an-address' }] }),
          newUser('bad2', {
            'urn:passkey-idp:params:scim:schemas:extension:education:2.0:User': { affiliation: ['pirate'] },
          }),
          newUser('bad3', { active: 'maybe' }),
          { schemas: [USER] },
        ]) {
          const r = await k.call('POST', '/Users', body);
          assert.equal(r.status, 400, JSON.stringify(body));
          assert.equal(r.body.scimType, 'invalidValue');
        }
      });
      it('a 10 MB body is 413; invalid UTF-8 and invalid JSON are 400 invalidSyntax; never a 500', async () => {
        const big = await k.call(
          'POST',
          '/Users',
          JSON.stringify({ ...newUser('big'), title: 'x'.repeat(10 * 1024 * 1024) }),
        );
        assert.equal(big.status, 413);
        const utf8 = await k.call(
          'POST',
          '/Users',
          Buffer.from([0x7b, 0x22, 0x75, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
        );
        assert.equal(utf8.status, 400);
        assert.equal(utf8.body.scimType, 'invalidSyntax');
        const json = await k.call('POST', '/Users', '{"userName": ');
        assert.equal(json.body.scimType, 'invalidSyntax');
        const nul = await k.call('POST', '/Users', JSON.stringify(newUser('nul', { title: 'a\u0000b' })));
        assert.equal(nul.status, 400);
        const type = await k.call('POST', '/Users', 'userName=x', {
          'content-type': 'application/x-www-form-urlencoded',
        });
        assert.equal(type.status, 415);
      });
      it('unknown query parameters and bad numbers are 400', async () => {
        assert.equal((await k.call('GET', '/Users?fliter=x')).status, 400);
        assert.equal((await k.call('GET', '/Users?count=abc')).status, 400);
      });
    });
  });
}

async function freshOtherToken(k: ScimKit): Promise<string> {
  const { createScimToken } = await import('../../src/directory/provisioning.ts');
  return (await createScimToken(k.ctx.store, 2, 'second')).token;
}
