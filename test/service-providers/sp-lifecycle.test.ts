// What disabling or removing a service provider or a user ends, on both databases: the SP's grants
// and tokens, the sessions' record of sign-ins to it (saml_session_sps), its users' consents and
// persistent NameIDs (kept on disable, gone on removal), and single sign-on to it; a user's SAML
// sign-ins with their sessions and their persistent NameIDs with the account. An SP known only from a
// trusted federation is blocked one by one, across refreshes of the aggregate. Registering one
// entityID twice at once is a conflict, never a database error. Every change is audited.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import {
  addServiceProvider,
  ensureServiceProviderClient,
  findServiceProvider,
  removeServiceProvider,
  serviceProviderClientId,
  setServiceProviderEnabled,
} from '../../src/service-providers/index.ts';
import { refreshFederation } from '../../src/service-providers/federations.ts';
import { disableUser, removeUser } from '../../src/oauth/account-lifecycle.ts';
import { endUserSessions } from '../../src/oauth/end-user-sessions.ts';
import { findClient } from '../../src/store/clients.ts';
import { findConsent, saveConsent } from '../../src/store/consents.ts';
import { findPayload, upsertPayload } from '../../src/store/oidc-payloads.ts';
import { persistentNameId, recordSessionSp } from '../../src/store/saml-sso.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import type { User } from '../../src/store/directory.ts';
import { party } from '../saml/saml-fixtures.ts';
import {
  federationOfOneSp,
  LOOPBACK_FEDERATION,
  RS,
  signedAggregate,
  spEntity,
  type MetadataServer,
} from '../saml/federation-fixtures.ts';
import { authnRequestXml, getSso, redirectQuery, shibboleth, type TestSp } from '../saml-idp/sso-fixtures.ts';

const FED_SP = 'https://wiki.example.edu/shibboleth';
const FED_ACS = 'https://wiki.example.edu/Shibboleth.sso/SAML2/POST';
const federation = await party('federation.example.org');
const HOUR = 3_600_000;

async function audit(ctx: TestContext, action: string) {
  const rows = await listAuditEvents(ctx.store.db, { action, limit: 10 });
  return rows.map((r) => ({ ...r, details: JSON.parse(r.details) as Record<string, unknown> }));
}

/** A session of the user with an SSO to the SP in it, a grant and a token of the SP's client, a consent and a persistent NameID. */
async function signedInTo(ctx: TestContext, user: User, entityId: string) {
  const now = Date.now();
  const clientId = serviceProviderClientId(entityId);
  const session = `sess-${randomBytes(6).toString('hex')}`;
  const grant = `grant-${randomBytes(6).toString('hex')}`;
  const token = `at-${randomBytes(6).toString('hex')}`;
  const payload = (type: string, id: string, body: object, grantId: string | null) =>
    upsertPayload(ctx.store.db, {
      type,
      id,
      payload: JSON.stringify(body),
      grant_id: grantId,
      user_code: null,
      uid: type === 'Session' ? session : null,
      expires_at: now + HOUR,
      account_id: user.sub,
    });
  await payload('Session', session, { uid: session, accountId: user.sub, authorizations: {} }, null);
  await payload('Grant', grant, { clientId, accountId: user.sub }, grant);
  await payload('AccessToken', token, { clientId, accountId: user.sub, grantId: grant }, grant);
  await saveConsent(ctx.store.db, user.id, clientId, ['openid', 'email'], now);
  const nameId = await persistentNameId(
    ctx.store.db,
    user.id,
    entityId,
    () => randomBytes(24).toString('base64url'),
    now,
  );
  await recordSessionSp(ctx.store.db, {
    session_uid: session,
    entity_id: entityId,
    user_id: user.id,
    name_id: nameId,
    name_id_format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
    session_index: `_${session}`,
    created_at: now,
    expires_at: now + HOUR,
  });
  return { clientId, session, grant, token, nameId };
}

async function sessionSps(ctx: TestContext, where: { entityId?: string; userId?: number }) {
  let q = ctx.store.db.selectFrom('saml_session_sps').select('session_uid');
  if (where.entityId) q = q.where('entity_id', '=', where.entityId);
  if (where.userId !== undefined) q = q.where('user_id', '=', where.userId);
  return (await q.execute()).length;
}

async function persistentIds(ctx: TestContext, where: { entityId?: string; userId?: number }) {
  let q = ctx.store.db.selectFrom('saml_persistent_ids').select('name_id');
  if (where.entityId) q = q.where('entity_id', '=', where.entityId);
  if (where.userId !== undefined) q = q.where('user_id', '=', where.userId);
  return (await q.execute()).length;
}

for (const dialect of dialects()) {
  describe(`disabling and removing service providers and users (${dialect})`, () => {
    let ctx: TestContext;
    let server: MetadataServer;
    let sp: TestSp;
    let fedId: number;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      sp = await shibboleth();
      await addServiceProvider(ctx.store, { metadata: sp.metadata, groups: ['userid-idp', 'email'] });
      ({ server, id: fedId } = await federationOfOneSp(ctx.store, federation, FED_SP));
    });
    after(async () => {
      await ctx?.close();
      await server?.close();
    });

    const sso = (issuer: string, acsUrl: string) =>
      getSso(ctx, redirectQuery(authnRequestXml(ctx, { issuer, acsUrl })));

    it('a disabled SP loses its grants, tokens and sessions’ sign-ins, keeps consents and NameIDs, and is refused', async () => {
      const user = await seedUser(ctx, 1, `d-${randomBytes(3).toString('hex')}@example.org`);
      const other = await seedUser(ctx, 1, `o-${randomBytes(3).toString('hex')}@example.org`);
      const mine = await signedInTo(ctx, user, sp.entityId);
      await signedInTo(ctx, other, FED_SP);
      assert.equal((await sso(sp.entityId, sp.acs)).statusCode, 303);

      await setServiceProviderEnabled(ctx.store, sp.entityId, false);
      assert.equal(await findPayload(ctx.store.db, 'Grant', 'id', mine.grant), undefined, 'grant gone');
      assert.equal(await findPayload(ctx.store.db, 'AccessToken', 'id', mine.token), undefined, 'token gone');
      assert.ok(await findPayload(ctx.store.db, 'Session', 'id', mine.session), 'the session itself stays');
      assert.equal(await sessionSps(ctx, { entityId: sp.entityId }), 0, 'sessions no longer list the SP');
      assert.equal(await sessionSps(ctx, { entityId: FED_SP }), 1, 'another SP’s are untouched');
      assert.deepEqual(await findConsent(ctx.store.db, user.id, mine.clientId), ['email', 'openid'], 'consent kept');
      assert.equal(await persistentIds(ctx, { entityId: sp.entityId }), 1, 'persistent NameID kept');
      assert.equal((await sso(sp.entityId, sp.acs)).statusCode, 403, 'SSO refused');
      const [record] = await audit(ctx, 'sp.disable');
      assert.deepEqual([record?.details.artifacts, record?.details.sessions], [2, 1]);

      await setServiceProviderEnabled(ctx.store, sp.entityId, true);
      assert.equal((await sso(sp.entityId, sp.acs)).statusCode, 303);
      const again = await persistentNameId(ctx.store.db, user.id, sp.entityId, () => 'another-candidate', Date.now());
      assert.equal(again, mine.nameId, 'the same NameID after enabling');
    });

    it('a removed SP loses consents and persistent NameIDs too, and is unknown to SSO', async () => {
      const user = await seedUser(ctx, 1, `r-${randomBytes(3).toString('hex')}@example.org`);
      const mine = await signedInTo(ctx, user, sp.entityId);
      await removeServiceProvider(ctx.store, sp.entityId);
      assert.equal(await findPayload(ctx.store.db, 'Grant', 'id', mine.grant), undefined);
      assert.equal(await findPayload(ctx.store.db, 'AccessToken', 'id', mine.token), undefined);
      assert.equal(await findConsent(ctx.store.db, user.id, mine.clientId), undefined, 'consent gone');
      assert.equal(await sessionSps(ctx, { entityId: sp.entityId }), 0);
      assert.equal(await persistentIds(ctx, { entityId: sp.entityId }), 0, 'persistent NameIDs gone');
      assert.ok(await persistentIds(ctx, { entityId: FED_SP }), 'another SP’s are kept');
      assert.equal((await sso(sp.entityId, sp.acs)).statusCode, 403, 'unknown issuer');
      const [record] = await audit(ctx, 'sp.remove');
      assert.ok(Number(record?.details.persistent_ids) >= 2, JSON.stringify(record?.details));
      // registered again, it starts afresh
      await addServiceProvider(ctx.store, { metadata: sp.metadata, groups: ['userid-idp', 'email'] });
      const fresh = await persistentNameId(ctx.store.db, user.id, sp.entityId, () => 'a-new-candidate', Date.now());
      assert.equal(fresh, 'a-new-candidate');
    });

    it('a disabled user’s sessions take their SAML sign-ins with them; a removed user’s NameIDs go', async () => {
      const user = await seedUser(ctx, 1, `u-${randomBytes(3).toString('hex')}@example.org`);
      const bystander = await seedUser(ctx, 1, `b-${randomBytes(3).toString('hex')}@example.org`);
      await signedInTo(ctx, user, sp.entityId);
      await signedInTo(ctx, user, FED_SP);
      await signedInTo(ctx, bystander, sp.entityId);
      await disableUser(ctx.store, user.eppn);
      assert.equal(await sessionSps(ctx, { userId: user.id }), 0, 'disabled: no SAML sign-in left');
      assert.equal(await sessionSps(ctx, { userId: bystander.id }), 1, 'another user’s stay');
      assert.equal(await persistentIds(ctx, { userId: user.id }), 2, 'NameIDs kept while disabled');

      await signedInTo(ctx, bystander, FED_SP);
      await endUserSessions(ctx.store, ctx.provider.current(), bystander.sub);
      assert.equal(await sessionSps(ctx, { userId: bystander.id }), 0, 'sessions ended by staff: the same');

      await removeUser(ctx.store, user.eppn);
      assert.equal(await persistentIds(ctx, { userId: user.id }), 0, 'removed: NameIDs gone');
      assert.equal(await persistentIds(ctx, { userId: bystander.id }), 2);
    });

    it('a federation SP is blocked by saml sp disable, across refreshes, until enable', async () => {
      const user = await seedUser(ctx, 1, `f-${randomBytes(3).toString('hex')}@example.org`);
      assert.equal((await sso(FED_SP, FED_ACS)).statusCode, 303, 'accepted before');
      const mine = await signedInTo(ctx, user, FED_SP);
      const disabled = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'disable', FED_SP, '--json']);
      assert.equal(disabled.code, 0, disabled.err);
      const view = JSON.parse(disabled.out) as { status: string; changed: boolean; federation_id: string };
      assert.deepEqual([view.status, view.changed, view.federation_id], ['disabled', true, String(fedId)]);
      assert.equal((await sso(FED_SP, FED_ACS)).statusCode, 403, 'refused');
      assert.notEqual((await findClient(ctx.store.db, mine.clientId))?.disabled_at, null, 'its client is disabled');
      assert.equal(await findPayload(ctx.store.db, 'Grant', 'id', mine.grant), undefined);
      assert.equal(await sessionSps(ctx, { entityId: FED_SP }), 0);
      const [record] = await audit(ctx, 'sp.disable');
      assert.equal(record?.subject, FED_SP);
      assert.equal(record?.details.federation_id, String(fedId));

      // a newer aggregate replaces the federation's SPs; the block stays
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [
            spEntity({ entityId: FED_SP, categories: [RS] }),
            spEntity({ entityId: 'https://x.example.edu/sp' }),
          ],
        }),
      );
      assert.equal(
        (await refreshFederation(ctx.store, LOOPBACK_FEDERATION, fedId, { force: true })).outcome,
        'updated',
      );
      assert.equal((await findServiceProvider(ctx.store, FED_SP))?.disabled, true);
      assert.equal((await sso(FED_SP, FED_ACS)).statusCode, 403, 'still refused after the refresh');
      const twice = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'disable', FED_SP]);
      assert.match(twice.out, /already disabled/);

      const enabled = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'enable', FED_SP]);
      assert.equal(enabled.code, 0, enabled.err);
      assert.equal((await findServiceProvider(ctx.store, FED_SP))?.disabled, false);
      assert.equal((await sso(FED_SP, FED_ACS)).statusCode, 303, 'accepted again');
      assert.equal((await findClient(ctx.store.db, mine.clientId))?.disabled_at, null);
      assert.equal((await audit(ctx, 'sp.enable'))[0]?.subject, FED_SP);

      const unknown = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'disable', 'https://nowhere.example.org/sp']);
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.err, /neither registered nor in a trusted federation/);
    });

    it('the client made for a federation SP is audited in its transaction', async () => {
      const entityId = 'https://x.example.edu/sp';
      const found = (await findServiceProvider(ctx.store, entityId))!;
      await ensureServiceProviderClient(ctx.store, found);
      await ensureServiceProviderClient(ctx.store, found);
      const records = (await audit(ctx, 'sp.client')).filter((r) => r.subject === entityId);
      assert.equal(records.length, 1, 'once: nothing changed the second time');
      assert.equal(records[0]?.client_id, serviceProviderClientId(entityId));
      assert.equal(records[0]?.details.created, true);
      assert.equal(records[0]?.details.federation_id, String(fedId));
      await ensureServiceProviderClient(ctx.store, { ...found, name: 'Renamed' });
      const renamed = (await audit(ctx, 'sp.client')).filter((r) => r.subject === entityId);
      assert.deepEqual([renamed.length, renamed[0]?.details.created, renamed[0]?.details.name], [2, false, 'Renamed']);
    });

    it('two registrations of one entityID at once: one succeeds, the other is a clear conflict', async () => {
      const racer = await shibboleth('race.example.org');
      const file = join(await mkdtemp(join(tmpdir(), 'sp-race-')), 'sp.xml');
      await writeFile(file, racer.metadata);
      const add = () => cli(ctx.config.databaseUrl, ['saml', 'sp', 'add', '--metadata', file]);
      const results = await Promise.all([add(), add()]);
      assert.deepEqual(results.map((r) => r.code).sort(), [0, 1], JSON.stringify(results));
      const loser = results.find((r) => r.code !== 0)!;
      assert.match(loser.err, /is already registered/);
      assert.doesNotMatch(loser.err, /duplicate|constraint|UNIQUE/i);
    });

    it('a registration that waits on a concurrent one for the same entityID is a 409', async () => {
      const racer = await shibboleth('race2.example.org');
      let inserted!: () => void;
      let release!: () => void;
      const insertedP = new Promise<void>((resolve) => (inserted = resolve));
      const held = new Promise<void>((resolve) => (release = resolve));
      // another writer has inserted the entityID and not committed yet
      const first = ctx.store.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('service_providers')
          .values({
            entity_id: racer.entityId,
            client_id: `held-${randomBytes(4).toString('hex')}`,
            name: 'held',
            groups: '',
            first_party: 0,
            name_id: 'persistent',
            encrypt: 'auto',
            sign: 'assertion',
            allow_unsolicited: 0,
            disabled_at: null,
            federation_id: null,
            metadata: racer.metadata,
            descriptor: '{}',
            created_at: Date.now(),
            updated_at: Date.now(),
          })
          .execute();
        inserted();
        await held;
      });
      await insertedP;
      const second = addServiceProvider(ctx.store, { metadata: racer.metadata });
      await new Promise((resolve) => setTimeout(resolve, 300));
      release();
      await first;
      await assert.rejects(second, (err: { status?: number; message: string }) => {
        assert.equal(err.status, 409, err.message);
        assert.match(err.message, /is already registered/);
        return true;
      });
    });
  });
}
