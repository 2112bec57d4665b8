// The profile photo on /account: the section of the account page and POST /account/photo.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import type { LightMyRequestResponse } from 'fastify';
import { dialects, startTestApp, seedOrg, seedUser, type TestContext } from '../helpers.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { UPLOADS_PER_HOUR } from '../../src/web/account-photo.ts';

const PASSWORD = 'correct horse battery staple';
const EPPN = 'ada@example.org';
const OTHER = 'grace@example.org';

/** A cookie jar over inject(): every cookie the server set goes back on the next request. */
function browser(ctx: TestContext) {
  const jar = new Map<string, string>();
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) jar.set(c.name, c.value);
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    cookie,
    async get(url: string) {
      const res = await ctx.app.inject({ method: 'GET', url, headers: { cookie: cookie() } });
      remember(res);
      return res;
    },
    async post(url: string, payload: Buffer | string, contentType: string) {
      const res = await ctx.app.inject({
        method: 'POST',
        url,
        headers: { cookie: cookie(), 'content-type': contentType },
        payload,
      });
      remember(res);
      return res;
    },
  };
}

async function multipart(fields: Record<string, string | File>) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return { payload: Buffer.from(await request.arrayBuffer()), contentType: request.headers.get('content-type')! };
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1];

for (const dialect of dialects()) {
  describe(`profile photo on /account (${dialect})`, () => {
    let ctx: TestContext;
    let b: ReturnType<typeof browser>;
    let png: File;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedUser(ctx, 1, EPPN, { name: 'Ada', password: PASSWORD });
      await seedUser(ctx, 1, OTHER, { name: 'Grace', password: PASSWORD });
      png = new File(
        [
          await sharp({ create: { width: 300, height: 150, channels: 3, background: '#118844' } })
            .png()
            .toBuffer(),
        ],
        'me.png',
        { type: 'image/png' },
      );
      b = await signedIn(EPPN);
    });
    after(() => ctx.close());

    async function signedIn(eppn: string) {
      const signedInBrowser = browser(ctx);
      const signIn = await signedInBrowser.get('/account');
      const login = await signedInBrowser.post(
        '/account/login',
        new URLSearchParams({ _csrf: csrfOf(signIn.body)!, username: eppn, password: PASSWORD }).toString(),
        'application/x-www-form-urlencoded',
      );
      assert.equal(login.statusCode, 303);
      return signedInBrowser;
    }
    const handle = async (eppn = EPPN) => (await findUserByEppn(ctx.store.db, eppn))!.photo_handle;
    const send = async (fields: Record<string, string | File>, as = b) => {
      const { payload, contentType } = await multipart(fields);
      return as.post('/account/photo', payload, contentType);
    };
    const accountPage = async (as = b) => {
      const page = await as.get('/account');
      assert.equal(page.statusCode, 200);
      return { body: page.body, csrf: csrfOf(page.body)! };
    };

    it('shows a photo section with an upload form', async () => {
      const { body } = await accountPage();
      assert.match(body, /<h2 id="photo-heading">Profile photo<\/h2>/);
      assert.match(body, /You have no profile photo/);
      assert.match(
        body,
        /<form method="post" action="\/account\/photo" enctype="multipart\/form-data" class="photo-upload">/,
      );
      // The same look as the rest of the page: its button styles, no unstyled controls.
      assert.match(body, /<button type="submit" name="action" value="upload" class="secondary">Upload photo<\/button>/);
      assert.doesNotMatch(body, /<button(?![^>]*\bclass=)[^>]*>/, 'every button has a style');
    });

    it('speaks Norwegian Bokmål with the rest of the page', async () => {
      const page = await ctx.app.inject({
        method: 'GET',
        url: '/account',
        headers: { cookie: b.cookie(), 'accept-language': 'nb-NO,nb;q=0.9' },
      });
      assert.match(page.body, /<h2 id="photo-heading">Profilbilde<\/h2>/);
      assert.match(page.body, /Du har ikke noe profilbilde\./);
      assert.match(page.body, /<label for="photo-file">Bilde<\/label>/);
      assert.match(page.body, />Last opp bilde<\/button>/);
      assert.match(page.body, /høyst 10 MiB og 40 megapiksler/);
      for (const english of ['Profile photo', 'Upload photo', 'You have no profile photo', 'Applications you allow'])
        assert.ok(!page.body.includes(english), english);
      const { payload, contentType } = await multipart({ _csrf: csrfOf(page.body)!, action: 'upload' });
      const refused = await ctx.app.inject({
        method: 'POST',
        url: '/account/photo',
        headers: { cookie: b.cookie(), 'content-type': contentType, 'accept-language': 'nb' },
        payload,
      });
      assert.equal(refused.statusCode, 400);
      assert.match(refused.body, /<html lang="nb">/);
      assert.match(refused.body, /Velg en bildefil å laste opp\./);
      assert.match(refused.body, /<main class="card">/);
      assert.ok(refused.body.includes(`Referanse for brukerstøtten: ${refused.headers['x-request-id']}`));
    });

    it('uploads a photo: stored at 128 px, shown on the page', async () => {
      const { csrf } = await accountPage();
      const res = await send({ _csrf: csrf, action: 'upload', photo: png });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/account#photo');
      const stored = await handle();
      assert.match(stored ?? '', /^p:[0-9a-f-]{36}$/);
      const { body } = await accountPage();
      const img =
        /<img class="photo" src="data:image\/jpeg;base64,([^"]+)" width="128" height="64" alt="Your profile photo"/.exec(
          body,
        );
      assert.ok(img, 'the page shows the stored photo');
      assert.deepEqual(
        await sharp(Buffer.from(img[1]!, 'base64'))
          .metadata()
          .then((m) => [m.format, m.width, m.height]),
        ['jpeg', 128, 64],
      );
    });

    it('refuses a file that is not an image with a clear message, changing nothing', async () => {
      const before = await handle();
      const { csrf } = await accountPage();
      const res = await send({
        _csrf: csrf,
        action: 'upload',
        photo: new File(['hello'], 'notes.txt', { type: 'text/plain' }),
      });
      assert.equal(res.statusCode, 400);
      assert.match(res.headers['content-type'] as string, /^text\/html/);
      assert.match(
        res.body,
        /The file could not be used as a photo\. Use a JPEG, PNG, WebP, GIF or AVIF image of at most 10 MiB and 40 megapixels\./,
      );
      assert.match(res.headers['content-security-policy'] as string, /default-src 'none'/);
      assert.equal(await handle(), before);
    });

    it('refuses an upload without a file', async () => {
      const { csrf } = await accountPage();
      const res = await send({ _csrf: csrf, action: 'upload' });
      assert.equal(res.statusCode, 400);
      assert.match(res.body, /Choose an image file/);
    });

    it('refuses a form without the CSRF token, changing nothing', async () => {
      const before = await handle();
      for (const fields of [
        { action: 'upload', photo: png },
        { _csrf: 'forged', action: 'remove' },
      ] as Record<string, string | File>[]) {
        const res = await send(fields);
        assert.equal(res.statusCode, 403);
        assert.equal(await handle(), before);
      }
    });

    it('refuses a body that is not multipart, and one over the size limit', async () => {
      const before = await handle();
      const garbled = await b.post('/account/photo', 'not multipart at all', 'multipart/form-data; boundary=xyz');
      assert.equal(garbled.statusCode, 400);
      const huge = await b.post('/account/photo', Buffer.alloc(11 * 1024 * 1024), 'multipart/form-data; boundary=xyz');
      assert.equal(huge.statusCode, 413);
      assert.equal(await handle(), before);
    });

    it('sends a browser without a session to sign in', async () => {
      const { payload, contentType } = await multipart({ action: 'upload', photo: png });
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/account/photo',
        headers: { 'content-type': contentType },
        payload,
      });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/account');
    });

    it('limits uploads to 20 an hour per user', async () => {
      assert.equal(UPLOADS_PER_HOUR, 20);
      const tiny = new File(
        [
          await sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
            .png()
            .toBuffer(),
        ],
        't.png',
        { type: 'image/png' },
      );
      // A user who has not uploaded yet: exactly UPLOADS_PER_HOUR uploads go through.
      const grace = await signedIn(OTHER);
      const { csrf } = await accountPage(grace);
      for (let i = 1; i <= UPLOADS_PER_HOUR; i++) {
        const res = await send({ _csrf: csrf, action: 'upload', photo: tiny }, grace);
        assert.equal(res.statusCode, 303, `upload ${i}`);
      }
      const stored = await handle(OTHER);
      const refused = await send({ _csrf: csrf, action: 'upload', photo: tiny }, grace);
      assert.equal(refused.statusCode, 429);
      assert.match(refused.body, /Too many photo uploads/);
      assert.ok(Number(refused.headers['retry-after']) > 0);
      assert.equal(await handle(OTHER), stored, 'the refused upload changed nothing');

      // The limit is per user: another user still uploads.
      const other = await send({ _csrf: (await accountPage()).csrf, action: 'upload', photo: tiny });
      assert.equal(other.statusCode, 303);
    });

    it('removes the photo', async () => {
      assert.ok(await handle());
      const { csrf, body } = await accountPage();
      assert.match(body, /value="remove" class="danger">Remove photo/);
      const res = await send({ _csrf: csrf, action: 'remove' });
      assert.equal(res.statusCode, 303);
      assert.equal(await handle(), null);
      assert.match((await accountPage()).body, /You have no profile photo/);
    });
  });
}
