// `saml sp ...` and `saml keys ...` through the admin CLI, metadata from files and over real HTTP,
// and every refusal as one line on stderr with a non-zero exit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { dialects, startTestApp, cli, type TestContext } from '../helpers.ts';
import { readMetadataSource } from '../../src/service-providers/index.ts';
import {
  minimalSp,
  mellonSp,
  shibbolethSp,
  simpleSamlPhpSp,
  spKeys,
  type SpKeys,
} from '../saml/sp-metadata-fixtures.ts';

let keys: SpKeys;
let dir: string;
let server: Server;
let base: string;
const pending: Array<() => void> = [];

before(async () => {
  keys = await spKeys();
  dir = mkdtempSync(join(tmpdir(), 'saml-cli-'));
  writeFileSync(join(dir, 'shibboleth.xml'), shibbolethSp(keys));
  writeFileSync(join(dir, 'mellon.xml'), mellonSp(keys));
  writeFileSync(join(dir, 'no-enc.xml'), minimalSp({ entityId: 'https://plain.example.org/sp' }));
  writeFileSync(
    join(dir, 'http-acs.xml'),
    minimalSp({
      acs: '<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="http://sp.example.org/acs" index="0"/>',
    }),
  );
  server = createServer((req, res) => {
    if (req.url === '/simplesaml.xml') {
      res.writeHead(200, { 'content-type': 'application/samlmetadata+xml' });
      return res.end(simpleSamlPhpSp(keys));
    }
    if (req.url === '/moved') {
      res.writeHead(302, { location: 'https://elsewhere.example.org/md.xml' });
      return res.end();
    }
    if (req.url === '/huge') {
      res.writeHead(200, { 'content-type': 'application/xml' });
      // no Content-Length: the cap must stop the stream itself
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      for (let i = 0; i < 40; i++) res.write(chunk);
      return res.end();
    }
    if (req.url === '/silent') {
      pending.push(() => res.destroy());
      return;
    }
    res.writeHead(404);
    res.end('not here');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  for (const close of pending) close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('metadata sources', () => {
  it('reads a file and an http URL on a loopback host', async () => {
    assert.match((await readMetadataSource(join(dir, 'mellon.xml'))).toString(), /mellon\/metadata/);
    assert.match((await readMetadataSource(`${base}/simplesaml.xml`)).toString(), /default-sp/);
  });

  it('refuses what it should not fetch or cannot read', async () => {
    await assert.rejects(
      readMetadataSource('http://sp.example.org/md.xml'),
      /must use https \(http only for localhost\)/,
    );
    await assert.rejects(readMetadataSource('ftp://sp.example.org/md.xml'), /must use https/);
    await assert.rejects(readMetadataSource(join(dir, 'missing.xml')), /cannot be read: no such file/);
    await assert.rejects(readMetadataSource(dir), /is not a file/);
    await assert.rejects(readMetadataSource(join(dir, 'mellon.xml'), { maxBytes: 100 }), /larger than 100 bytes/);
    await assert.rejects(readMetadataSource(`${base}/nothing`), /answered HTTP 404/);
    await assert.rejects(
      readMetadataSource(`${base}/moved`),
      /redirects to 'https:\/\/elsewhere\.example\.org\/md\.xml'; give the final URL/,
    );
    await assert.rejects(readMetadataSource(`${base}/huge`), /sent more than 1048576 bytes/);
    await assert.rejects(readMetadataSource(`${base}/silent`, { timeoutMs: 300 }), /did not answer within 0\.3 s/);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await assert.rejects(
      readMetadataSource(`http://127.0.0.1:${port}/md.xml`),
      /could not be fetched \(ECONNREFUSED\)/,
    );
  });
});

for (const dialect of dialects()) {
  describe(`saml commands (${dialect})`, () => {
    let ctx: TestContext;
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);
    const json = async (...args: string[]) => {
      const r = await run(...args, '--json');
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out);
    };
    const fails = async (pattern: RegExp, ...args: string[]) => {
      const r = await run(...args);
      assert.notEqual(r.code, 0, args.join(' '));
      assert.equal(r.err.split('\n').length, 1, r.err);
      assert.match(r.err, pattern, args.join(' '));
    };

    before(async () => (ctx = await startTestApp(dialect)));
    after(async () => ctx.close());

    it('saml sp add --metadata <file> --groups ... --json prints the entity_id and client_id', async () => {
      const sp = await json(
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'shibboleth.xml'),
        '--groups',
        'userid-idp email',
      );
      assert.equal(sp.entity_id, 'https://sp.example.org/shibboleth');
      assert.match(sp.client_id, /^saml-[a-z2-7]{26}$/);
      assert.deepEqual(sp.groups, ['userid-idp', 'email']);
      assert.equal(sp.nameid, 'persistent');
      assert.equal(sp.encrypt, 'auto');
      assert.equal(sp.sign, 'assertion');
      assert.equal(sp.status, 'active');
      assert.equal(sp.encryption_certificates.length, 1);
      // what the groups release, from the one release table
      assert.deepEqual(sp.attributes, [
        { friendly_name: 'eduPersonPrincipalName', name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6' },
        { friendly_name: 'subject-id', name: 'urn:oasis:names:tc:SAML:attribute:subject-id' },
        { friendly_name: 'mail', name: 'urn:oid:0.9.2342.19200300.100.1.3' },
      ]);
      assert.match(
        sp.assertion_consumer_services[0],
        /^1 urn:oasis:names:tc:SAML:2\.0:bindings:HTTP-POST https:\/\/sp\.example\.org\/Shibboleth\.sso\/SAML2\/POST$/,
      );
    });

    it('adds from a URL with every option', async () => {
      const sp = await json(
        'saml',
        'sp',
        'add',
        '--metadata',
        `${base}/simplesaml.xml`,
        '--name',
        'Portal',
        '--first-party',
        '--nameid',
        'transient',
        '--encrypt',
        'never',
        '--sign',
        'both',
        '--allow-unsolicited',
      );
      assert.equal(sp.name, 'Portal');
      assert.equal(sp.first_party, true);
      assert.equal(sp.nameid, 'transient');
      assert.equal(sp.encrypt, 'never');
      assert.equal(sp.sign, 'both');
      assert.equal(sp.allow_unsolicited, true);
      assert.equal(sp.subject_id_requirement, 'any');
    });

    it('refuses bad input with one line and a non-zero exit, changing nothing', async () => {
      await fails(/--metadata is required/, 'saml', 'sp', 'add');
      await fails(/already registered/, 'saml', 'sp', 'add', '--metadata', join(dir, 'shibboleth.xml'));
      await fails(/cannot be read: no such file/, 'saml', 'sp', 'add', '--metadata', join(dir, 'none.xml'));
      await fails(/must use https/, 'saml', 'sp', 'add', '--metadata', 'http://sp.example.org/md');
      await fails(
        /must use https \(http only for localhost\)/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'http-acs.xml'),
      );
      await fails(
        /--nameid must be one of persistent, transient, email, none/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'mellon.xml'),
        '--nameid',
        'kerberos',
      );
      await fails(
        /--encrypt must be one of auto, always, never/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'mellon.xml'),
        '--encrypt',
        'yes',
      );
      await fails(
        /--sign must be one of response, assertion, both/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'mellon.xml'),
        '--sign',
        'none',
      );
      await fails(
        /unknown attribute group 'all'/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'mellon.xml'),
        '--groups',
        'all',
      );
      await fails(
        /--encrypt always needs an encryption key/,
        'saml',
        'sp',
        'add',
        '--metadata',
        join(dir, 'no-enc.xml'),
        '--encrypt',
        'always',
      );
      await fails(/unknown option '--bogus'/, 'saml', 'sp', 'add', '--metadata', join(dir, 'mellon.xml'), '--bogus');
      const list = await json('saml', 'sp', 'list');
      assert.equal(list.length, 2);
      assert.deepEqual(
        list.map((entry: { attributes: { friendly_name: string }[] }) => entry.attributes.map((a) => a.friendly_name)),
        [['eduPersonPrincipalName', 'subject-id', 'mail'], []],
      );
      assert.deepEqual((await json('saml', 'sp', 'show', list[1].entity_id)).attributes, []);
    });

    it('lists, shows, updates, disables, enables and removes', async () => {
      const entityId = 'https://sp.example.org/shibboleth';
      const list = await run('saml', 'sp', 'list');
      assert.equal(list.code, 0);
      assert.match(list.out, /^entity_id\s+name\s+status\s+groups/);
      assert.match(list.out, /https:\/\/sp\.example\.org\/shibboleth .*active\s+userid-idp email/);
      const show = await run('saml', 'sp', 'show', entityId);
      assert.match(show.out, /sign\s+assertion/);
      const updated = await json(
        'saml',
        'sp',
        'update',
        entityId,
        '--groups',
        'userinfo-name',
        '--nameid',
        'email',
        '--first-party',
      );
      assert.deepEqual(updated.groups, ['userinfo-name']);
      assert.equal(updated.first_party, true);
      assert.equal((await json('saml', 'sp', 'update', entityId, '--no-first-party')).first_party, false);
      await fails(/nothing to change/, 'saml', 'sp', 'update', entityId);
      await fails(
        /give --first-party or --no-first-party, not both/,
        'saml',
        'sp',
        'update',
        entityId,
        '--first-party',
        '--no-first-party',
      );
      await fails(/the metadata is for/, 'saml', 'sp', 'update', entityId, '--metadata', join(dir, 'mellon.xml'));
      await fails(/is not registered/, 'saml', 'sp', 'show', 'https://nobody.example.org');
      await fails(/entity id is required/, 'saml', 'sp', 'disable');

      assert.equal((await run('saml', 'sp', 'disable', entityId)).out, `service provider ${entityId} disabled`);
      assert.equal(
        (await run('saml', 'sp', 'disable', entityId)).out,
        `service provider ${entityId} was already disabled`,
      );
      assert.equal((await json('saml', 'sp', 'show', entityId)).status, 'disabled');
      assert.equal((await json('saml', 'sp', 'enable', entityId)).status, 'active');
      const removed = await json('saml', 'sp', 'remove', entityId);
      assert.deepEqual(removed, { entity_id: entityId, removed: true, artifacts_deleted: 0 });
      await fails(/is not registered/, 'saml', 'sp', 'remove', entityId);
      const audit = await json('audit', 'list', '--action', 'sp.');
      assert.deepEqual(
        audit.map((a: { action: string }) => a.action),
        ['sp.remove', 'sp.enable', 'sp.disable', 'sp.update', 'sp.update', 'sp.add', 'sp.add'],
      );
      assert.match(audit[0].actor, /^cli/);
    });

    it('saml keys list makes the keys on first use; rotate publishes new ones that are used later', async () => {
      const first = await json('saml', 'keys', 'list');
      assert.deepEqual(first.map((k: { use: string }) => k.use).sort(), ['encryption', 'metadata', 'signing']);
      assert.ok(first.every((k: { state: string }) => k.state === 'active'));
      assert.deepEqual(await json('saml', 'keys', 'list'), first, 'made once');
      const rotated = await json('saml', 'keys', 'rotate', '--use', 'signing');
      assert.equal(rotated.length, 1);
      const activates = Date.parse(rotated[0].activates_at);
      assert.ok(Math.abs(activates - (Date.now() + 12 * 3600_000)) < 60_000);
      const after = await json('saml', 'keys', 'list');
      const signing = after.filter((k: { use: string }) => k.use === 'signing');
      assert.deepEqual(signing.map((k: { state: string }) => k.state).sort(), ['active', 'next']);
      assert.equal(signing.find((k: { state: string }) => k.state === 'active').retires_at, rotated[0].activates_at);
      await fails(/--use must be one of signing, encryption, metadata/, 'saml', 'keys', 'rotate', '--use', 'tls');
      const [record] = await json('audit', 'list', '--action', 'saml_keys.rotate');
      assert.equal(record.subject, rotated[0].kid);
    });

    it('saml --help lists the commands; saml sp add --help its options', async () => {
      const group = await run('saml', '--help');
      assert.equal(group.code, 0);
      for (const name of [
        'sp add',
        'sp list',
        'sp show',
        'sp update',
        'sp disable',
        'sp enable',
        'sp remove',
        'keys list',
        'keys rotate',
      ])
        assert.match(group.out, new RegExp(`saml ${name}`));
      const one = await run('saml', 'sp', 'add', '--help');
      assert.match(one.out, /--metadata <file\|https URL>/);
      assert.match(one.out, /--nameid persistent\|transient\|email\|none/);
    });
  });
}
