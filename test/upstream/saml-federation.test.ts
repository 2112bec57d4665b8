// `upstream add --type saml --federation <id> --entity <entityID>`, on both databases: the IdP is
// copied out of a trusted federation's signed aggregate (served on loopback), checked as a
// `--metadata` document is, and signs in over HTTP at the ACS (a real SimpleSAMLphp's entity too); a refresh of the federation (the
// command and the schedule) rolls the IdP's signing key over (the old key refused after, the new one
// accepted); an entity that left the aggregate keeps its last metadata until its validUntil; every
// refusal is one line. And the edugain and eidas namespaces, for SAML providers only.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects, seedOrg } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';
import { addFederation } from '../../src/service-providers/federations.ts';
import { refreshDueFederations } from '../../src/service-providers/federation-refresh.ts';
import { addUpstreamProvider, loadUpstreamProvider, updateUpstreamProvider } from '../../src/upstream/providers.ts';
import { samlDescriptorOf, samlUpstreamOf } from '../../src/upstream/saml-provider.ts';
import { refreshFederatedProviders } from '../../src/upstream/saml-federation.ts';
import { buildAuthnRequest } from '../../src/upstream/saml-request.ts';
import { receiveSamlResponse, validateSamlResponse } from '../../src/upstream/saml-response.ts';
import { buildSpMetadata, parseIdpMetadata } from '../../src/saml/metadata/index.ts';
import { signInAtSsp, simpleSamlPhpMissing, startSimpleSamlPhp } from './simplesamlphp.ts';
import { startUpstreamRequest } from '../../src/upstream/requests.ts';
import { party, type Party } from '../saml/saml-fixtures.ts';
import {
  LOOPBACK_FEDERATION,
  metadataServer,
  signedAggregate,
  spEntity,
  type MetadataServer,
} from '../saml/federation-fixtures.ts';
import { forgedIdp, forgeResponse, type ForgedIdp } from './saml-forge.ts';

const IDP = 'https://idp.member.example/idp';
const SP = 'https://wiki.member.example/shibboleth';

/**
 * An IdP's EntityDescriptor as an aggregate holds it: its own metadata without its signature, the
 * md prefix declared by the aggregate's root only (the copy taken out must declare it itself), no
 * validUntil of its own (the aggregate's is the copy's).
 */
function entityOf(metadata: string): string {
  return metadata
    .replace(/^<\?xml[^>]*>\s*/, '')
    .replace(/ xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/, '')
    .replace(/<ds:Signature[\s\S]*?<\/ds:Signature>/, '')
    .replace(/ ID="[^"]*"/, '')
    .replace(/ validUntil="[^"]*"/, '');
}

function member(idp: ForgedIdp): string {
  assert.match(idp.metadata, / xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/);
  return entityOf(idp.metadata);
}

function captureLog() {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push({ level, obj, msg });
  const log = {
    lines,
    level: 'info',
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    debug: at('debug'),
    trace: at('trace'),
    fatal: at('fatal'),
    silent: () => undefined,
    child: () => log,
  };
  return log as typeof log & import('fastify').FastifyBaseLogger;
}

for (const dialect of dialects()) {
  describe(`upstream SAML providers from a federation (${dialect})`, () => {
    let server: E2EServer;
    let md: MetadataServer;
    let federation: Party;
    let idp: ForgedIdp;
    let rolled: ForgedIdp;
    let fedId: number;
    let providerId: string;
    let acs: string;
    let audience: string;
    const run = (...args: string[]) => cli(server.config.databaseUrl, args, '', { PUBLIC_URL: server.url });
    let validDays = 7;
    const serve = (...entities: string[]) =>
      md.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [spEntity({ entityId: SP }), ...entities],
          validUntil: new Date(Date.now() + validDays * 86400_000),
        }),
      );

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server, 1, 'member.example');
      md = await metadataServer();
      federation = await party('federation.example.org');
      idp = await forgedIdp(IDP, ['member.example'], 'Member University');
      rolled = await forgedIdp(IDP, ['member.example'], 'Member University');
      serve(member(idp));
      ({ id: fedId } = await addFederation(server.store, LOOPBACK_FEDERATION, {
        url: `${md.url}/fed.xml`,
        certificate: federation.certificate,
      }));
      acs = `${server.url}/saml2/sp/acs`;
      audience = `${server.url}/saml2/sp/metadata`;
    });

    after(async () => {
      await server?.close();
      await md?.close();
    });

    const jar: string[] = [];
    const signIn = async (signer: ForgedIdp) => {
      const binding = `binding-${jar.length}`;
      const { id } = await startUpstreamRequest(server.store, {
        providerId,
        purpose: { kind: 'sign-in', interactionUid: 'interaction-uid-1' },
        browserBinding: binding,
      });
      jar.push(`upstream-${id}=${binding}`);
      const response = await fetch(acs, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar.join('; ') },
        body: new URLSearchParams({
          SAMLResponse: forgeResponse(signer, { destination: acs, audience, inResponseTo: id }),
        }).toString(),
      });
      const body = await response.text();
      return { status: response.status, location: response.headers.get('location'), body };
    };

    const oneLine = (result: { code: number; err: string }, message: RegExp, what: string) => {
      assert.equal(result.code, 1, what);
      assert.match(result.err, message, what);
      assert.doesNotMatch(result.err, /\n|\bat [\w.<>]+ \(/, `${what}: one line, no stack`);
    };

    it('refuses --federation/--entity given wrongly, an unknown federation, and entities it cannot use', async () => {
      const add = (...args: string[]) => run('upstream', 'add', '--org', '1', '--type', 'saml', ...args);
      oneLine(
        await add('--metadata', '/tmp/idp.xml', '--federation', String(fedId), '--entity', IDP),
        /either --metadata or --federation with --entity, not both/,
        'both sources',
      );
      oneLine(await add('--federation', String(fedId)), /--federation needs --entity/, 'no entity');
      oneLine(await add('--entity', IDP), /--entity needs --federation/, 'no federation');
      oneLine(await add('--federation', '999', '--entity', IDP), /no federation 999/, 'unknown federation');
      oneLine(await add('--federation', 'x', '--entity', IDP), /--federation/, 'not a number');
      oneLine(
        await add('--federation', String(fedId), '--entity', 'https://absent.example/idp'),
        /https:\/\/absent\.example\/idp is not in the federation's metadata/,
        'not in the aggregate',
      );
      oneLine(
        await add('--federation', String(fedId), '--entity', SP),
        /has no IDPSSODescriptor for SAML 2\.0/,
        'an SP, not an IdP',
      );
      oneLine(
        await run('upstream', 'add', '--org', '1', '--type', 'oidc', '--federation', String(fedId), '--entity', IDP),
        /are for --type saml/,
        'an OpenID Connect provider',
      );
      oneLine(await add(), /--metadata/, 'no source at all');
      assert.equal((await run('upstream', 'list', '--json')).out, '[]');
    });

    it('adds the IdP by entityID: bound to the federation, shown so, audited', async () => {
      const added = await run(
        'upstream',
        'add',
        '--org',
        '1',
        '--type',
        'saml',
        '--federation',
        String(fedId),
        '--entity',
        IDP,
        '--link-by',
        'eppn',
        '--namespace',
        'edugain',
        '--json',
      );
      assert.equal(added.code, 0, added.err);
      const view = JSON.parse(added.out) as Record<string, unknown>;
      providerId = view.id as string;
      assert.equal(view.entity_id, IDP);
      assert.equal(view.federation_id, fedId);
      assert.equal(view.metadata_source, `${md.url}/fed.xml`);
      assert.equal(view.name, 'Member University');
      assert.equal(view.namespace, 'edugain');
      assert.equal(view.federation_missing_since, undefined);
      const shown = await run('upstream', 'show', providerId);
      assert.match(shown.out, new RegExp(`^federation_id: ${fedId}$`, 'm'));
      const list = JSON.parse((await run('upstream', 'list', '--json')).out) as Record<string, unknown>[];
      assert.deepEqual(
        list.map((p) => [p.id, p.federation_id]),
        [[providerId, fedId]],
      );
      assert.match((await run('upstream', 'list')).out, /federation_id[\s\S]*\n\S+.*\b1\b/);
      const audit = await server.store.db
        .selectFrom('audit_events')
        .select(['kind', 'details'])
        .where('kind', '=', 'upstream.add')
        .execute();
      assert.equal(audit.length, 1);
      assert.deepEqual((JSON.parse(audit[0]!.details!) as { federation: number }).federation, fedId);
      // the copy is a document of its own that the --metadata reader accepts, no longer valid than the aggregate says
      const descriptor = await samlDescriptorOf(await loadUpstreamProvider(server.store, providerId), Date.now());
      assert.deepEqual(descriptor.signingCertificates, idp.descriptor.signingCertificates);
    });

    it('signs in through it over HTTP with the key the aggregate lists', async () => {
      const ok = await signIn(idp);
      assert.equal(ok.status, 303, ok.body.slice(0, 300));
      assert.match(ok.location ?? '', /^\/interaction\/interaction-uid-1\/upstream-return\//);
      const foreign = await signIn(rolled);
      assert.equal(foreign.status, 400, 'a key the aggregate does not list');
    });

    it('keeps its metadata with the federation: update --metadata refused, the federation not removable', async () => {
      md.documents.set('/idp.xml', rolled.metadata);
      oneLine(
        await run('upstream', 'update', providerId, '--metadata', `${md.url}/idp.xml`),
        new RegExp(`comes from federation ${fedId}`),
        'update --metadata',
      );
      const removed = await run('saml', 'federation', 'remove', String(fedId));
      oneLine(removed, new RegExp(`upstream provider\\(s\\) ${providerId} \\(organization 1\\)`), 'federation remove');
      const shown = await run('saml', 'federation', 'show', String(fedId), '--json');
      assert.equal(shown.code, 0);
      assert.deepEqual((JSON.parse(shown.out) as { upstream_providers: unknown[] }).upstream_providers, [
        { id: providerId, org_id: 1, entity_id: IDP, missing_since: null },
      ]);
      assert.match(
        (await run('saml', 'federation', 'show', String(fedId))).out,
        /upstream providers taken from it:\n {2}\w+ {2}organization 1/,
      );
    });

    it('a refresh rolls the signing key over: the old key refused after, the new one accepted, audited', async () => {
      serve(member(rolled));
      const refreshed = await run('saml', 'federation', 'refresh', String(fedId), '--json');
      assert.equal(refreshed.code, 0, refreshed.err);
      const outcome = JSON.parse(refreshed.out) as { outcome: string; upstream_providers: number };
      assert.equal(outcome.outcome, 'updated');
      assert.equal(outcome.upstream_providers, 1);
      assert.equal((await signIn(idp)).status, 400, 'the old key after the rollover');
      assert.equal((await signIn(rolled)).status, 303, 'the new key');
      const audit = await server.store.db
        .selectFrom('audit_events')
        .select(['kind', 'subject', 'details'])
        .where('kind', '=', 'upstream.federation_refresh')
        .execute();
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.subject, `upstream:${providerId}`);
      const details = JSON.parse(audit[0]!.details!) as { outcome: string; signing_certificates: string[] };
      assert.equal(details.outcome, 'updated');
      assert.equal(details.signing_certificates.length, 1);
      // the same aggregate again (a 304): nothing changes
      const again = JSON.parse((await run('saml', 'federation', 'refresh', String(fedId), '--json')).out) as {
        outcome: string;
      };
      assert.equal(again.outcome, 'unchanged');
      // a newer aggregate with the same entry (only its validUntil later): stored, no record
      const validUntil = async () =>
        (await samlDescriptorOf(await loadUpstreamProvider(server.store, providerId), Date.now())).validUntil!;
      const before = await validUntil();
      validDays = 8;
      serve(member(rolled));
      const newer = JSON.parse((await run('saml', 'federation', 'refresh', String(fedId), '--json')).out) as {
        outcome: string;
        upstream_providers: number;
      };
      assert.deepEqual([newer.outcome, newer.upstream_providers], ['updated', 0]);
      assert.ok((await validUntil()) > before + 12 * 3600_000, 'validUntil moved on with the aggregate');
      const records = await server.store.db
        .selectFrom('audit_events')
        .select('kind')
        .where('kind', '=', 'upstream.federation_refresh')
        .execute();
      assert.equal(records.length, 1);
    });

    it('a provider bound while a refresh fetched (its entity not looked for) is left alone, not marked missing', async () => {
      const records = async () =>
        (
          await server.store.db
            .selectFrom('audit_events')
            .select('kind')
            .where('kind', '=', 'upstream.federation_refresh')
            .execute()
        ).length;
      const before = await records();
      // what a refresh that read the bound entityIDs before this provider was added brings: nothing for it
      const log = captureLog();
      const changed = await server.store.db
        .transaction()
        .execute((trx) => refreshFederatedProviders(trx, fedId, [], { now: Date.now(), log }));
      assert.equal(changed, 0);
      assert.deepEqual(log.lines, []);
      assert.equal(await records(), before);
      const shown = JSON.parse((await run('upstream', 'show', providerId, '--json')).out) as Record<string, unknown>;
      assert.equal(shown.federation_missing_since, undefined);
      assert.equal((await signIn(rolled)).status, 303);
    });

    it('an entity that left the aggregate keeps its last metadata until its validUntil (the scheduled refresh)', async () => {
      serve();
      const log = captureLog();
      const later = Date.now() + 2 * 3600_000; // the federation's refresh (hourly) is due
      await refreshDueFederations(server.store, LOOPBACK_FEDERATION, log, later);
      const warned = log.lines.find((l) => l.level === 'warn' && l.obj.upstream === providerId);
      assert.ok(warned, JSON.stringify(log.lines));
      assert.match(String(warned.obj.reason), /is not in the federation's metadata/);
      const shown = JSON.parse((await run('upstream', 'show', providerId, '--json')).out) as Record<string, unknown>;
      assert.equal(typeof shown.federation_missing_since, 'string');
      assert.match(String(shown.federation_missing_reason), /not in the federation's metadata/);
      // still usable now, with the last verified keys
      assert.equal((await signIn(rolled)).status, 303);
      // but not past the validUntil of the last aggregate that listed it (eight days)
      const provider = await loadUpstreamProvider(server.store, providerId);
      await samlDescriptorOf(provider, Date.now() + 7 * 86400_000);
      await assert.rejects(samlDescriptorOf(provider, Date.now() + 9 * 86400_000), /expired/);
      // one record for the change, not one per refresh
      await refreshDueFederations(server.store, LOOPBACK_FEDERATION, log, later + 2 * 3600_000);
      const missing = await server.store.db
        .selectFrom('audit_events')
        .select('details')
        .where('kind', '=', 'upstream.federation_refresh')
        .execute();
      assert.deepEqual(
        missing.map((r) => (JSON.parse(r.details!) as { outcome: string }).outcome),
        ['updated', 'missing'],
      );
      // back in the aggregate: no longer missing
      serve(member(rolled));
      await refreshDueFederations(server.store, LOOPBACK_FEDERATION, log, later + 4 * 3600_000);
      const back = JSON.parse((await run('upstream', 'show', providerId, '--json')).out) as Record<string, unknown>;
      assert.equal(back.federation_missing_since, undefined);
    });

    it(
      "a real IdP (SimpleSAMLphp) taken from the aggregate: its Responses verify with the copy's keys",
      { skip: simpleSamlPhpMissing() },
      async () => {
        const signing = await party('sp signing');
        const encryption = await party('sp encryption');
        const spId = 'http://localhost:8999/saml2/sp/metadata';
        const spAcs = 'http://localhost:8999/saml2/sp/acs';
        const spMetadata = buildSpMetadata({
          entityId: spId,
          acsUrl: spAcs,
          signingCertificates: [signing.certificate],
          encryptionCertificates: [encryption.certificate],
          validUntil: Date.now() + 86400_000,
          cacheDurationMs: 3600_000,
          signingKey: { privateKey: signing.privateKey, certificate: signing.certificate },
        });
        const ssp = await startSimpleSamlPhp({ spMetadata, encryptAssertions: true });
        try {
          const own = await ssp.metadata();
          serve(member(rolled), entityOf(own));
          const added = await run(
            'upstream',
            'add',
            '--org',
            '1',
            '--type',
            'saml',
            '--federation',
            String(fedId),
            '--entity',
            ssp.entityId,
            '--json',
          );
          assert.equal(added.code, 0, added.err);
          const id = (JSON.parse(added.out) as { id: string }).id;
          const upstream = await samlUpstreamOf(await loadUpstreamProvider(server.store, id), Date.now());
          const direct = await parseIdpMetadata(own);
          assert.deepEqual(upstream.idp.signingCertificates, direct.signingCertificates);
          assert.deepEqual(upstream.idp.singleSignOnServices, direct.singleSignOnServices);
          const requestId = `u${Math.random().toString(36).slice(2)}x`;
          const outgoing = buildAuthnRequest({
            requestId,
            spEntityId: spId,
            acsUrl: spAcs,
            idp: upstream.idp,
            binding: 'redirect',
            signingKey: { privateKey: signing.privateKey, certificate: signing.certificate },
            now: Date.now(),
          });
          const answer = await signInAtSsp({ url: outgoing.url }, { username: 'ada', password: 'ada-pass-123' });
          const requests = new Set([requestId]);
          const result = await validateSamlResponse(
            await receiveSamlResponse(answer.fields),
            upstream,
            { spEntityId: spId, acsUrl: spAcs, decryptionKeys: [encryption.privateKey], now: Date.now() },
            {
              consumeRequest: async (r: string) => requests.delete(r),
              firstUse: async () => true,
            },
          );
          assert.equal(result.encrypted, true);
          assert.equal(result.assertion.attributes.eppn, 'ada@uni.example');
          assert.equal((await run('upstream', 'remove', id)).code, 0);
        } finally {
          await ssp.stop();
        }
      },
    );

    it('the federation is removable once its providers are gone', async () => {
      assert.equal((await run('upstream', 'remove', providerId)).code, 0);
      const removed = await run('saml', 'federation', 'remove', String(fedId));
      assert.equal(removed.code, 0, removed.err);
    });

    it('edugain and eidas are for SAML providers only (add and update)', async () => {
      const oidc = {
        orgId: 1,
        type: 'oidc',
        issuer: 'https://op.member.example',
        clientId: 'client',
        clientSecret: 'secret',
      };
      for (const namespace of ['edugain', 'eidas']) {
        await assert.rejects(
          addUpstreamProvider(server.store, server.keys, { ...oidc, namespace }),
          new RegExp(`--namespace ${namespace} is a SAML federation's: only for SAML providers`),
        );
      }
      const added = await addUpstreamProvider(server.store, server.keys, oidc);
      for (const namespace of ['edugain', 'eidas']) {
        await assert.rejects(
          updateUpstreamProvider(server.store, server.keys, added.id, { namespace }),
          /only for SAML providers/,
        );
      }
      assert.equal((await loadUpstreamProvider(server.store, added.id)).namespace, undefined);
      const saml = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'saml',
        namespace: 'eidas',
        saml: { entityId: idp.entityId, metadataXml: idp.metadata },
      });
      assert.equal(saml.namespace, 'eidas');
    });
  });
}
