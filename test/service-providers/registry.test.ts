// The SAML service provider registry on both databases: each SP paired with a 'saml' client that
// the authorization server knows with a redirect URI from PUBLIC_URL, every change audited and
// seen at once, disabling and removal ending what the SP's client was granted.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { dialects, startTestApp, cli, seedOrg, PUBLIC_URL, TEST_SECRET, type TestContext } from '../helpers.ts';
import {
  addServiceProvider,
  ensureServiceProviderClient,
  findServiceProvider,
  findServiceProviderByClientId,
  listServiceProviders,
  removeServiceProvider,
  serviceProviderClientId,
  setServiceProviderEnabled,
  updateServiceProvider,
  type ServiceProvider,
} from '../../src/service-providers/index.ts';
import { findClient } from '../../src/store/clients.ts';
import { openStore } from '../../src/store/index.ts';
import { buildApp } from '../../src/app.ts';
import { keyring } from '../../src/crypto.ts';
import { upsertPayload, findPayload } from '../../src/store/oidc-payloads.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { mellonSp, minimalSp, pysaml2Sp, shibbolethSp, spKeys, type SpKeys } from '../saml/sp-metadata-fixtures.ts';

const CONTINUE = `${PUBLIC_URL}/saml2/idp/continue`;

function authorize(ctx: TestContext, clientId: string, redirectUri = CONTINUE) {
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: 'none',
    scope: 'openid',
    state: 's',
  });
  return ctx.app.inject({ method: 'GET', url: `/oauth/authorization?${query}` });
}

/** Accepted by the authorization server: sent on to the sign-in interaction. */
function accepted(res: { statusCode: number; headers: Record<string, unknown> }): boolean {
  return res.statusCode === 303 && String(res.headers.location).startsWith('/interaction/');
}

async function audit(ctx: TestContext, action: string) {
  const rows = await listAuditEvents(ctx.store.db, { action, limit: 10 });
  return rows.map((r) => ({ ...r, details: JSON.parse(r.details) as Record<string, unknown> }));
}

let keys: SpKeys;
before(async () => {
  keys = await spKeys();
});

describe('client ids of service providers', () => {
  it('are saml- and 26 base32 characters of the SHA-256 of the entityID', () => {
    const id = serviceProviderClientId('https://sp.example.org/shibboleth');
    assert.match(id, /^saml-[a-z2-7]{26}$/);
    assert.equal(id, serviceProviderClientId('https://sp.example.org/shibboleth'));
    assert.notEqual(id, serviceProviderClientId('https://sp.example.org/shibboleth2'));
    // SHA-256("abc") begins ba 78 16 bf: bits 10111 01001 11100 00001 01101 01111 -> x j 4 b n p (RFC 4648 alphabet)
    assert.ok(serviceProviderClientId('abc').startsWith('saml-xj4bnp'), serviceProviderClientId('abc'));
  });
});

for (const dialect of dialects()) {
  describe(`service provider registry (${dialect})`, () => {
    let ctx: TestContext;
    before(async () => (ctx = await startTestApp(dialect)));
    after(async () => ctx.close());

    it('adds an SP with the defaults and a paired saml client the authorization server knows', async () => {
      const sp = await addServiceProvider(ctx.store, { metadata: shibbolethSp(keys), groups: ['userid-idp', 'email'] });
      assert.equal(sp.entityId, 'https://sp.example.org/shibboleth');
      assert.equal(sp.clientId, serviceProviderClientId(sp.entityId));
      assert.equal(sp.name, sp.entityId);
      assert.deepEqual(sp.groups, ['userid-idp', 'email']);
      assert.equal(sp.nameId, 'persistent');
      assert.equal(sp.encrypt, 'auto');
      assert.equal(sp.sign, 'assertion');
      assert.equal(sp.allowUnsolicited, false);
      assert.equal(sp.firstParty, false);
      assert.equal(sp.disabled, false);
      assert.equal(sp.federationId, null);
      const found = await findServiceProvider(ctx.store, sp.entityId);
      assert.deepEqual(found?.descriptor.assertionConsumerServices, sp.descriptor.assertionConsumerServices);
      assert.equal((await findServiceProviderByClientId(ctx.store, sp.clientId))?.entityId, sp.entityId);

      const client = await findClient(ctx.store.db, sp.clientId);
      assert.equal(client?.protocol, 'saml');
      assert.equal(client?.groups, 'userid-idp email');
      assert.equal(client?.secret_hash, null);
      assert.deepEqual(JSON.parse(client!.grant_types), ['authorization_code']);
      assert.equal(client?.redirect_uris, '[]'); // never trusted from the row

      assert.ok(accepted(await authorize(ctx, sp.clientId)), 'the continuation URI from PUBLIC_URL is accepted');
      const other = await authorize(ctx, sp.clientId, 'https://sp.example.org/Shibboleth.sso/SAML2/POST');
      assert.equal(other.statusCode, 400, 'no other redirect URI');

      const [record] = await audit(ctx, 'sp.add');
      assert.equal(record?.subject, sp.entityId);
      assert.equal(record?.client_id, sp.clientId);
      assert.deepEqual(record?.details.groups, ['userid-idp', 'email']);
    });

    it('names an SP after --name, its mdui:DisplayName, else its entityID', async () => {
      const named = await addServiceProvider(ctx.store, { metadata: mellonSp(keys), name: '  Learning platform ' });
      assert.equal(named.name, 'Learning platform');
      assert.equal((await findClient(ctx.store.db, named.clientId))?.name, 'Learning platform');
      const ui = await addServiceProvider(ctx.store, {
        metadata: pysaml2Sp(keys),
        firstParty: true,
        nameId: 'transient',
      });
      assert.equal(ui.name, 'Research Wiki');
      assert.equal((await findClient(ctx.store.db, ui.clientId))?.first_party, 1);
      assert.equal(ui.nameId, 'transient');
      assert.deepEqual(
        (await listServiceProviders(ctx.store)).map((s) => s.entityId).sort(),
        [named.entityId, ui.entityId, 'https://sp.example.org/shibboleth'].sort(),
      );
    });

    it('refuses a second registration, unknown groups and choices, and --encrypt always without a key', async () => {
      await assert.rejects(addServiceProvider(ctx.store, { metadata: shibbolethSp(keys) }), (err: any) => {
        assert.equal(err.status, 409);
        assert.match(err.message, /already registered/);
        return true;
      });
      const fresh = () => minimalSp({ entityId: `https://x${randomBytes(4).toString('hex')}.example.org/sp` });
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: fresh(), groups: ['everything'] }),
        /unknown attribute group 'everything'/,
      );
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: fresh(), nameId: 'x509' }),
        /--nameid must be one of persistent, transient, email, none/,
      );
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: fresh(), encrypt: 'maybe' }),
        /--encrypt must be one of/,
      );
      await assert.rejects(addServiceProvider(ctx.store, { metadata: fresh(), sign: 'none' }), /--sign must be one of/);
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: fresh(), encrypt: 'always' }),
        /--encrypt always needs an encryption key/,
      );
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: fresh(), name: '\u0007' }),
        /name must be 1-200 characters/,
      );
      await assert.rejects(addServiceProvider(ctx.store, { metadata: '<nope' }), /not well-formed/);
      const wantsSigned = fresh().replace('<md:SPSSODescriptor ', '<md:SPSSODescriptor WantAssertionsSigned="true" ');
      await assert.rejects(
        addServiceProvider(ctx.store, { metadata: wantsSigned, sign: 'response' }),
        /says WantAssertionsSigned: --sign response would not sign them/,
      );
      // nothing of the refused ones was written
      assert.equal((await listServiceProviders(ctx.store)).length, 3);
    });

    it('updates settings and metadata, keeping the client in step, and refuses another entity', async () => {
      const entityId = 'https://sp.example.org/shibboleth';
      const newKeys = await spKeys('rotated.example.org');
      const sp = await updateServiceProvider(ctx.store, entityId, {
        metadata: shibbolethSp(newKeys),
        groups: ['userinfo-name'],
        name: 'Library',
        nameId: 'email',
        encrypt: 'always',
        sign: 'both',
        allowUnsolicited: true,
        firstParty: true,
      });
      assert.equal(sp.name, 'Library');
      assert.equal(sp.sign, 'both');
      assert.equal(sp.allowUnsolicited, true);
      const stored = await findServiceProvider(ctx.store, entityId);
      assert.ok(!stored?.descriptor.signingCertificates[0]!.replace(/\s/g, '').includes(keys.signing));
      assert.ok(stored?.descriptor.signingCertificates[0]!.replace(/\s|-----[A-Z ]+-----/g, '') === newKeys.signing);
      assert.equal(stored?.encrypt, 'always');
      const client = await findClient(ctx.store.db, sp.clientId);
      assert.equal(client?.name, 'Library');
      assert.equal(client?.groups, 'userinfo-name');
      assert.equal(client?.first_party, 1);
      const [record] = await audit(ctx, 'sp.update');
      assert.deepEqual(record?.details.fields, [
        'metadata',
        'name',
        'groups',
        'first_party',
        'nameid',
        'encrypt',
        'sign',
        'allow_unsolicited',
      ]);

      await assert.rejects(
        updateServiceProvider(ctx.store, entityId, { metadata: mellonSp(keys) }),
        /the metadata is for 'https:\/\/app\.example\.org\/mellon\/metadata'/,
      );
      await assert.rejects(updateServiceProvider(ctx.store, entityId, {}), /nothing to change/);
      await assert.rejects(
        updateServiceProvider(ctx.store, 'https://nobody.example.org', { name: 'x' }),
        (err: any) => err.status === 404,
      );
      // --encrypt always stays only while the metadata has an encryption key
      await assert.rejects(
        updateServiceProvider(ctx.store, entityId, { metadata: minimalSp({ entityId }) }),
        /--encrypt always needs an encryption key/,
      );
    });

    it('disabling stops the SP at once (the cached client too) and deletes its grants; enabling restores it', async () => {
      const sp = (await findServiceProvider(ctx.store, 'https://app.example.org/mellon/metadata')) as ServiceProvider;
      assert.ok(accepted(await authorize(ctx, sp.clientId)), 'known (and now cached) before');
      const grantId = `grant-${randomBytes(6).toString('hex')}`;
      await upsertPayload(ctx.store.db, {
        type: 'Grant',
        id: grantId,
        payload: JSON.stringify({ clientId: sp.clientId, accountId: 'u1' }),
        grant_id: grantId,
        user_code: null,
        uid: null,
        expires_at: null,
        account_id: 'u1',
      });
      const { serviceProvider, changed } = await setServiceProviderEnabled(ctx.store, sp.entityId, false);
      assert.equal(changed, true);
      assert.equal(serviceProvider?.disabled, true);
      assert.notEqual((await findClient(ctx.store.db, sp.clientId))?.disabled_at, null);
      assert.equal(await findPayload(ctx.store.db, 'Grant', 'id', grantId), undefined, 'its grants are gone');
      const refused = await authorize(ctx, sp.clientId);
      assert.equal(refused.statusCode, 400, 'unknown to the authorization server at once');
      assert.match(refused.body, /not registered with this sign-in service/);
      const [record] = await audit(ctx, 'sp.disable');
      assert.equal(record?.details.artifacts, 1);
      assert.equal((await setServiceProviderEnabled(ctx.store, sp.entityId, false)).changed, false);

      const enabled = await setServiceProviderEnabled(ctx.store, sp.entityId, true);
      assert.equal(enabled.serviceProvider?.disabled, false);
      assert.equal((await findClient(ctx.store.db, sp.clientId))?.disabled_at, null);
      assert.ok(accepted(await authorize(ctx, sp.clientId)));
      assert.equal((await audit(ctx, 'sp.enable')).length, 1);
    });

    it('an SP disabled by the admin command stops within a second on another instance that had it cached', async () => {
      const store = await openStore(ctx.config.databaseUrl);
      const other = await buildApp({ config: ctx.config, store, keys: keyring(TEST_SECRET) });
      await other.app.ready();
      try {
        const sp = (await findServiceProvider(ctx.store, 'https://app.example.org/mellon/metadata')) as ServiceProvider;
        const ask = () => authorize({ ...ctx, app: other.app }, sp.clientId);
        assert.ok(accepted(await ask()), 'known, and kept, on the other instance');
        const r = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'disable', sp.entityId]);
        assert.equal(r.code, 0, r.err);
        const started = Date.now();
        let refusedAfter = Infinity;
        for (let i = 0; i < 30; i++) {
          if ((await ask()).statusCode === 400) {
            refusedAfter = Date.now() - started;
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        assert.ok(refusedAfter < 1000, `refused after ${refusedAfter} ms`);
        assert.equal((await cli(ctx.config.databaseUrl, ['saml', 'sp', 'enable', sp.entityId])).code, 0);
      } finally {
        await other.app.close();
        await store.close();
      }
    });

    it('removing deletes the SP, its client and its grants', async () => {
      const sp = (await findServiceProvider(ctx.store, 'http://localhost:8087/sp.xml')) as ServiceProvider;
      assert.ok(accepted(await authorize(ctx, sp.clientId)));
      const grantId = `grant-${randomBytes(6).toString('hex')}`;
      await upsertPayload(ctx.store.db, {
        type: 'Grant',
        id: grantId,
        payload: JSON.stringify({ clientId: sp.clientId, accountId: 'u1' }),
        grant_id: grantId,
        user_code: null,
        uid: null,
        expires_at: null,
        account_id: 'u1',
      });
      assert.deepEqual(await removeServiceProvider(ctx.store, sp.entityId), { artifacts: 1 });
      assert.equal(await findServiceProvider(ctx.store, sp.entityId), undefined);
      assert.equal(await findClient(ctx.store.db, sp.clientId), undefined);
      assert.equal(await findPayload(ctx.store.db, 'Grant', 'id', grantId), undefined);
      assert.equal((await authorize(ctx, sp.clientId)).statusCode, 400);
      const [record] = await audit(ctx, 'sp.remove');
      assert.equal(record?.subject, sp.entityId);
      await assert.rejects(removeServiceProvider(ctx.store, sp.entityId), (err: any) => err.status === 404);
    });

    it('the client commands refuse a saml client', async () => {
      const sp = (await findServiceProvider(ctx.store, 'https://app.example.org/mellon/metadata')) as ServiceProvider;
      for (const args of [
        ['client', 'update', sp.clientId, '--name', 'x'],
        ['client', 'disable', sp.clientId],
        ['client', 'enable', sp.clientId],
        ['client', 'remove', sp.clientId],
        ['client', 'set-groups', sp.clientId, '--groups', 'email'],
        ['client', 'secret', 'rotate', sp.clientId],
      ]) {
        const r = await cli(ctx.config.databaseUrl, args);
        assert.notEqual(r.code, 0, args.join(' '));
        assert.match(r.err, /belongs to a SAML service provider: use saml sp/, args.join(' '));
      }
      await seedOrg(ctx);
      const r = await cli(ctx.config.databaseUrl, ['client', 'grant-orgs', sp.clientId, '--orgs', '1']);
      assert.notEqual(r.code, 0);
      assert.match(r.err, /belongs to a SAML service provider/);
      assert.equal((await findClient(ctx.store.db, sp.clientId))?.name, 'Learning platform');
    });

    it('ensureServiceProviderClient makes the client of an SP met through a federation, once', async () => {
      const entityId = 'https://fed-sp.example.org/sp';
      const sp: ServiceProvider = {
        entityId,
        clientId: serviceProviderClientId(entityId),
        name: 'Federated SP',
        groups: ['userid-idp'],
        firstParty: false,
        nameId: 'persistent',
        encrypt: 'auto',
        sign: 'assertion',
        allowUnsolicited: false,
        disabled: false,
        federationId: 'fed-1',
        descriptor: (await import('../../src/saml/metadata/index.ts')).spDescriptorOf(
          (await import('../../src/saml/xml/index.ts')).parseXml(minimalSp({ entityId })).root,
        ),
        createdAt: 0,
        updatedAt: 0,
      };
      await Promise.all([ensureServiceProviderClient(ctx.store, sp), ensureServiceProviderClient(ctx.store, sp)]);
      const row = await findClient(ctx.store.db, sp.clientId);
      assert.equal(row?.protocol, 'saml');
      assert.equal(row?.groups, 'userid-idp');
      assert.ok(accepted(await authorize(ctx, sp.clientId)));
      await ensureServiceProviderClient(ctx.store, { ...sp, groups: ['userid-idp', 'email'] });
      assert.equal((await findClient(ctx.store.db, sp.clientId))?.groups, 'userid-idp email');
    });
  });
}
