// An upstream provider's logo (`upstream add|update --logo`, docs/upstream.md): read from a file or
// fetched once from a URL and checked as an organization's logo is; served by the service itself at
// /upstream/<id>/logo with the headers an image needs (an SVG sandboxed); shown in the provider's
// button on the organization's sign-in page, whose accessible name stays the provider's name; gone
// for a disabled or removed provider; on SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, seedOrg } from '../helpers.ts';
import { startRelyingParty, startServer, type E2EServer, type RelyingParty } from '../e2e/helpers.ts';
import { fetchBrowser } from './oidc-upstream.ts';

const dir = mkdtempSync(join(tmpdir(), 'idp-upstream-logo-'));
// The smallest PNG: a 1x1 transparent pixel.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const SVG =
  '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><script>alert(1)</script><rect width="40" height="40" fill="#0b6e4f"/></svg>';
const file = (name: string, data: Buffer | string) => {
  const path = join(dir, name);
  writeFileSync(path, data);
  return path;
};
const pngFile = file('logo.png', PNG);
const svgFile = file('logo.svg', SVG);
const bigFile = file('big.png', Buffer.concat([PNG, Buffer.alloc(101 * 1024)]));
const textFile = file('notes.png', 'not an image at all');
// HTML dressed up as a PNG by its name: the type comes from the content
const disguisedFile = file('disguised.png', '<html><body><script>alert(document.cookie)</script></body></html>');
const gifFile = file('logo.gif', Buffer.from('R0lGODlhAQABAAAAACw=', 'base64'));
// an SVG that asks for a stylesheet of its own before the root: not an image the service serves
const styledFile = file(
  'styled.svg',
  Buffer.from(
    '<?xml-stylesheet href="https://evil.example/x.xsl" type="text/xsl"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>',
  ),
);

/** A web server on a loopback port with a few images and not-images for --logo <URL>. */
async function imageServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/logo.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    if (req.url === '/moved') return void res.writeHead(302, { location: '/logo.png' }).end();
    if (req.url === '/page')
      return void res.writeHead(200, { 'content-type': 'image/png' }).end('<html><script>x</script></html>');
    if (req.url === '/huge') return void res.writeHead(200).end(Buffer.concat([PNG, Buffer.alloc(200 * 1024)]));
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

for (const dialect of dialects()) {
  describe(`upstream provider logos (${dialect})`, () => {
    let server: E2EServer;
    let rp: RelyingParty;
    let images: Awaited<ReturnType<typeof imageServer>>;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      rp = await startRelyingParty(server, { firstParty: true });
      images = await imageServer();
    });
    after(async () => {
      await images?.close();
      await rp?.close();
      await server?.close();
    });

    const run = (args: string[]) => cli(server.config.databaseUrl, args, 'client-secret-0123456789\n');
    const OIDC = ['--org', '1', '--type', 'oidc', '--issuer', 'http://127.0.0.1:9', '--client-id', 'c'];

    async function add(name: string, extra: string[] = []) {
      const r = await run(['upstream', 'add', ...OIDC, '--client-secret-stdin', '--name', name, ...extra, '--json']);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { id: string; logo: { type: string; bytes: number } | null };
    }
    async function show(id: string) {
      const r = await run(['upstream', 'show', id, '--json']);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { logo: { type: string; bytes: number } | null };
    }
    const get = (path: string, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${path}`, { headers, redirect: 'manual' });

    /** The organization's sign-in page (reached by a login_hint in its realm). */
    async function signInPage(): Promise<string> {
      const page = await fetchBrowser().walk((await rp.begin({ login_hint: 'someone@example.org' })).url, (u) =>
        u.href.startsWith(rp.redirectUri),
      );
      assert.equal(page.status, 200);
      return page.body;
    }
    /** The button of provider `id` on the page: the whole link. */
    const buttonOf = (page: string, id: string) =>
      new RegExp(`<a class="button secondary" href="/interaction/[A-Za-z0-9_-]+/upstream/${id}">(.*?)</a>`).exec(
        page,
      )?.[1];

    it('adds with a PNG: shown as {type, bytes}, audited, served with the headers an image needs', async () => {
      const added = await add('PNG IdP', ['--logo', pngFile]);
      assert.deepEqual(added.logo, { type: 'image/png', bytes: PNG.length });
      assert.deepEqual((await show(added.id)).logo, { type: 'image/png', bytes: PNG.length });
      const text = await run(['upstream', 'show', added.id]);
      assert.match(text.out, /^logo: \{"type":"image\/png","bytes":\d+\}$/m);
      const audit = await server.store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'upstream.add')
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      assert.deepEqual(JSON.parse(String(audit.details)).logo, { type: 'image/png', bytes: PNG.length });

      const page = await signInPage();
      const button = buttonOf(page, added.id);
      assert.ok(button, 'the button is on the page');
      const src =
        /^<img class="upstream-logo" src="(\/upstream\/[a-z0-9]{12}\/logo\?v=[\w-]{16})" alt="">PNG IdP$/.exec(
          button,
        )?.[1];
      assert.ok(src, `a decorative image, then the name alone: ${button}`);
      assert.equal(src.split('?')[0], `/upstream/${added.id}/logo`);

      const logo = await get(src);
      assert.equal(logo.status, 200);
      assert.equal(logo.headers.get('content-type'), 'image/png');
      assert.deepEqual(Buffer.from(await logo.arrayBuffer()), PNG);
      assert.equal(logo.headers.get('x-content-type-options'), 'nosniff');
      assert.match(logo.headers.get('content-security-policy')!, /sandbox/);
      assert.equal(logo.headers.get('cross-origin-resource-policy'), 'same-origin');
      assert.equal(logo.headers.get('cache-control'), 'public, max-age=86400, immutable');
      const etag = logo.headers.get('etag')!;
      assert.equal(etag, `"${new URL(src, server.url).searchParams.get('v')}"`);
      // another version of the URL (an older page) revalidates; a matching ETag is a 304
      assert.equal((await get(`/upstream/${added.id}/logo?v=old`)).headers.get('cache-control'), 'no-cache');
      assert.equal((await get(`/upstream/${added.id}/logo`, { 'if-none-match': etag })).status, 304);
    });

    it('adds with an SVG: served as image/svg+xml in a sandbox, never sniffed', async () => {
      const added = await add('SVG IdP', ['--logo', svgFile]);
      assert.deepEqual(added.logo, { type: 'image/svg+xml', bytes: Buffer.byteLength(SVG) });
      const src = /src="([^"]+)"/.exec(buttonOf(await signInPage(), added.id) ?? '')?.[1];
      assert.ok(src);
      const logo = await get(src);
      assert.equal(logo.status, 200);
      assert.equal(logo.headers.get('content-type'), 'image/svg+xml');
      assert.equal(await logo.text(), SVG);
      assert.equal(logo.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(
        logo.headers.get('content-security-policy'),
        "default-src 'none'; style-src 'unsafe-inline'; sandbox",
      );
    });

    it('a provider without a logo has the button as before, and no logo to fetch', async () => {
      const added = await add('Plain IdP');
      assert.equal(added.logo, null);
      assert.equal(buttonOf(await signInPage(), added.id), 'Plain IdP');
      assert.equal((await get(`/upstream/${added.id}/logo`)).status, 404);
    });

    it('refuses a file that is too big, not an image, or an image of another type under a PNG name', async () => {
      const before = (await run(['upstream', 'list', '--json'])).out;
      const cases: [string, RegExp][] = [
        [bigFile, /--logo: the logo must be at most 100 KiB/],
        [textFile, /--logo: the logo must be a PNG, WebP or SVG image/],
        [disguisedFile, /--logo: the logo must be a PNG, WebP or SVG image/],
        [gifFile, /--logo: the logo must be a PNG, WebP or SVG image/],
        [styledFile, /--logo: the logo must be a PNG, WebP or SVG image/],
        [join(dir, 'missing.png'), /--logo: cannot read the logo file .*ENOENT/],
        [dir, /--logo: the logo '.*' is not a file/],
      ];
      for (const [path, message] of cases) {
        const r = await run(['upstream', 'add', ...OIDC, '--client-secret-stdin', '--name', 'Bad', '--logo', path]);
        assert.equal(r.code, 1, path);
        assert.match(r.err, message);
        assert.doesNotMatch(r.err, /at .*\.ts:\d+|stack|SQL/i);
      }
      assert.equal((await run(['upstream', 'list', '--json'])).out, before, 'nothing was added');
    });

    it('fetches a logo given as a URL once, checked by content, without following a redirect', async () => {
      const added = await add('Fetched IdP', ['--logo', `${images.url}/logo.png`]);
      assert.deepEqual(added.logo, { type: 'image/png', bytes: PNG.length });
      const cases: [string, RegExp][] = [
        [`${images.url}/moved`, /--logo URL '.*\/moved' redirects to '\/logo\.png'; give the final URL/],
        [`${images.url}/page`, /--logo: the logo must be a PNG, WebP or SVG image/],
        [`${images.url}/huge`, /--logo URL '.*\/huge' sent more than 102400 bytes/],
        [`${images.url}/gone`, /--logo URL '.*\/gone' answered HTTP 404/],
        ['http://example.com/logo.png', /--logo URL 'http:\/\/example\.com\/logo\.png' must use https/],
      ];
      for (const [url, message] of cases) {
        const r = await run(['upstream', 'add', ...OIDC, '--client-secret-stdin', '--name', 'Bad', '--logo', url]);
        assert.equal(r.code, 1, url);
        assert.match(r.err, message);
      }
    });

    it('update replaces the logo (a new URL), --no-logo and --logo "" remove it; audited', async () => {
      const added = await add('Changing IdP', ['--logo', pngFile]);
      const first = /src="([^"]+)"/.exec(buttonOf(await signInPage(), added.id) ?? '')?.[1];
      const updated = await run(['upstream', 'update', added.id, '--logo', svgFile, '--json']);
      assert.equal(updated.code, 0, updated.err);
      assert.deepEqual((JSON.parse(updated.out) as { logo: unknown }).logo, {
        type: 'image/svg+xml',
        bytes: Buffer.byteLength(SVG),
      });
      const second = /src="([^"]+)"/.exec(buttonOf(await signInPage(), added.id) ?? '')?.[1];
      assert.ok(first && second && first !== second, 'a changed logo has another URL');
      assert.equal((await get(first)).headers.get('cache-control'), 'no-cache', 'the old URL is no longer kept');
      assert.equal((await get(second)).headers.get('content-type'), 'image/svg+xml');
      const audit = await server.store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'upstream.update')
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      assert.deepEqual(JSON.parse(String(audit.details)), {
        id: added.id,
        fields: ['logo'],
        logo: { type: 'image/svg+xml', bytes: Buffer.byteLength(SVG) },
      });

      const bad = await run(['upstream', 'update', added.id, '--logo', textFile]);
      assert.equal(bad.code, 1);
      assert.match(bad.err, /--logo: the logo must be a PNG, WebP or SVG image/);
      assert.equal((await show(added.id)).logo?.type, 'image/svg+xml', 'a refused logo changes nothing');
      const both = await run(['upstream', 'update', added.id, '--logo', pngFile, '--no-logo']);
      assert.match(both.err, /give --logo or --no-logo, not both/);

      const removed = await run(['upstream', 'update', added.id, '--no-logo', '--json']);
      assert.equal(removed.code, 0, removed.err);
      assert.equal((JSON.parse(removed.out) as { logo: unknown }).logo, null);
      assert.equal((await get(second)).status, 404);
      assert.equal(buttonOf(await signInPage(), added.id), 'Changing IdP');

      await run(['upstream', 'update', added.id, '--logo', pngFile]);
      assert.equal((await show(added.id)).logo?.type, 'image/png');
      assert.equal((await run(['upstream', 'update', added.id, '--logo', ''])).code, 0);
      assert.equal((await show(added.id)).logo, null);
    });

    it("a disabled provider's logo is a 404 (again there once enabled), a removed one's too", async () => {
      const added = await add('Switched IdP', ['--logo', pngFile]);
      const src = /src="([^"]+)"/.exec(buttonOf(await signInPage(), added.id) ?? '')?.[1];
      assert.ok(src);
      assert.equal((await get(src)).status, 200);
      assert.equal((await run(['upstream', 'disable', added.id])).code, 0);
      const disabled = await get(src);
      assert.equal(disabled.status, 404);
      assert.equal(await disabled.text(), 'Not Found');
      assert.equal(buttonOf(await signInPage(), added.id), undefined);
      assert.equal((await run(['upstream', 'enable', added.id])).code, 0);
      assert.equal((await get(src)).status, 200);
      assert.equal((await run(['upstream', 'remove', added.id])).code, 0);
      assert.equal((await get(src)).status, 404);
    });

    it('serves nothing but an upstream logo: other ids and paths are a 404 without a clue', async () => {
      for (const path of [
        '/upstream/aaaaaaaaaaaa/logo',
        '/upstream/1/logo',
        '/upstream/..%2F..%2Fbrand%2Fsite/logo',
        '/upstream/%00/logo',
        '/upstream/AAAAAAAAAAAA/logo',
      ]) {
        const res = await get(path);
        assert.ok(res.status === 404 || res.status === 400, `${path}: ${res.status}`);
        assert.doesNotMatch(await res.text(), /stack|sql|select/i);
      }
    });

    it('a logo URL an earlier release stored is kept unused: no logo, the button as before', async () => {
      const added = await add('Old logo URL IdP');
      await server.store.db
        .updateTable('upstream_providers')
        .set({ logo_url: 'https://cdn.example.com/logo.png' })
        .where('id', '=', added.id)
        .execute();
      assert.equal((await show(added.id)).logo, null);
      assert.equal(buttonOf(await signInPage(), added.id), 'Old logo URL IdP');
      assert.doesNotMatch(await signInPage(), /cdn\.example\.com/);
    });
  });
}
