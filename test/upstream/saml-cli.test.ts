// `upstream add --type saml --metadata <file|URL>` and its update, on both databases: the metadata
// is read from a file or fetched (http only on loopback here; a size cap, redirects refused),
// checked strictly (an SP's metadata, a DTD, garbage: clear errors), a new document for another
// entity refused (its NameIDs must never meet this provider's links), and the options shown.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { forgedIdp, type ForgedIdp } from './saml-forge.ts';

for (const dialect of dialects()) {
  describe(`upstream add --type saml (${dialect})`, () => {
    let ctx: TestContext;
    let idp: ForgedIdp;
    let other: ForgedIdp;
    let dir: string;
    let http: Server;
    let base: string;
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'uni.example');
      idp = await forgedIdp(undefined, undefined, 'Uni Example');
      other = await forgedIdp('https://other.example/idp', ['other.example']);
      dir = mkdtempSync(join(tmpdir(), 'upstream-saml-cli-'));
      writeFileSync(join(dir, 'idp.xml'), idp.metadata);
      writeFileSync(join(dir, 'other.xml'), other.metadata);
      writeFileSync(join(dir, 'dtd.xml'), `<!DOCTYPE x [<!ENTITY a "b">]>${idp.metadata.replace(/^<\?xml[^>]*>/, '')}`);
      const sp = (await ctx.app.inject({ url: '/saml2/sp/metadata' })).body;
      writeFileSync(join(dir, 'sp.xml'), sp);
      http = createServer((req, res) => {
        if (req.url === '/idp.xml') return void res.writeHead(200).end(idp.metadata);
        if (req.url === '/huge.xml') return void res.writeHead(200).end('<a>' + 'x'.repeat(2 * 1024 * 1024) + '</a>');
        if (req.url === '/moved') return void res.writeHead(302, { location: '/idp.xml' }).end();
        res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    });

    after(async () => {
      await new Promise<void>((resolve) => http?.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
      await ctx?.close();
    });

    it('adds a provider from a metadata file, with its options, and shows the SP endpoints', async () => {
      const added = await run(
        'upstream',
        'add',
        '--org',
        '1',
        '--type',
        'saml',
        '--metadata',
        join(dir, 'idp.xml'),
        '--name',
        'Uni IdP',
        '--link-by',
        'eppn',
        '--email-verified',
        '--json',
      );
      assert.equal(added.code, 0, added.err);
      const view = JSON.parse(added.out) as Record<string, unknown>;
      assert.equal(view.type, 'saml');
      assert.equal(view.entity_id, idp.entityId);
      assert.equal(view.email_verified, true);
      assert.equal(view.require_encryption, false);
      const shown = JSON.parse((await run('upstream', 'show', String(view.id), '--json')).out) as Record<
        string,
        unknown
      >;
      assert.equal(shown.sp_metadata, 'https://idp.example.test/saml2/sp/metadata');
      assert.equal(shown.acs, 'https://idp.example.test/saml2/sp/acs');
      const audit = await listAuditEvents(ctx.store.db, {});
      assert.ok(audit.some((e) => e.kind === 'upstream.add' && e.subject === `upstream:${view.id}`));
      // options alone, then metadata of the same entity: accepted; of another entity: refused
      const updated = await run(
        'upstream',
        'update',
        String(view.id),
        '--require-encryption',
        'on',
        '--email-verified',
        'off',
        '--json',
      );
      assert.equal(updated.code, 0, updated.err);
      const after = JSON.parse(updated.out) as Record<string, unknown>;
      assert.equal(after.require_encryption, true);
      assert.equal(after.email_verified, false);
      assert.equal((await run('upstream', 'update', String(view.id), '--metadata', `${base}/idp.xml`)).code, 0);
      const swapped = await run('upstream', 'update', String(view.id), '--metadata', join(dir, 'other.xml'));
      assert.notEqual(swapped.code, 0);
      assert.match(swapped.err, /another identity provider/);
    });

    it('adds one from an URL; refuses oversized, redirected, DTD, SP and missing metadata clearly', async () => {
      const added = await run(
        'upstream',
        'add',
        '--org',
        '1',
        '--type',
        'saml',
        '--metadata',
        `${base}/idp.xml`,
        '--json',
      );
      assert.equal(added.code, 0, added.err);
      const view = JSON.parse(added.out) as { metadata_source: string; name: string };
      assert.equal(view.metadata_source, `${base}/idp.xml`);
      assert.equal(view.name, 'Uni Example', "the button says the metadata's display name");
      const cases: [string, RegExp][] = [
        [`${base}/huge.xml`, /more than \d+ bytes/],
        [`${base}/moved`, /redirects/],
        [`${base}/nothing.xml`, /HTTP 404/],
        ['ftp://example.org/idp.xml', /https/],
        [join(dir, 'dtd.xml'), /DTD|DOCTYPE|document type/i],
        [join(dir, 'sp.xml'), /not a SAML 2.0 identity provider/],
        [join(dir, 'missing.xml'), /cannot be read/],
      ];
      for (const [source, message] of cases) {
        const result = await run('upstream', 'add', '--org', '1', '--type', 'saml', '--metadata', source);
        assert.notEqual(result.code, 0, source);
        assert.match(result.err, message, `${source}: ${result.err}`);
        assert.doesNotMatch(result.err, /\n\s+at /, 'no stack trace');
      }
      const without = await run('upstream', 'add', '--org', '1', '--type', 'saml');
      assert.notEqual(without.code, 0);
      assert.match(without.err, /--metadata/);
    });
  });
}
