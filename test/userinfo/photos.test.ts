// Profile photos: `user set-photo` through the admin CLI, and GET /userinfo/v1/user/media/<handle>.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  PUBLIC_URL,
  type TestContext,
  cli as adminCli,
} from '../helpers.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { mintUserToken } from './fixtures.ts';

const REDIRECT = 'https://rp.example.com/callback';
const solid = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#2a7ae2' } });
const noisy = (width: number, height: number) =>
  sharp({
    create: { width, height, channels: 3, background: '#000000', noise: { type: 'gaussian', mean: 128, sigma: 40 } },
  });

const dir = mkdtempSync(join(tmpdir(), 'idp-photos-'));
const files: Record<string, string> = {};

async function writeImages() {
  const put = (name: string, data: Buffer | string) => {
    files[name] = join(dir, name);
    writeFileSync(files[name], data);
  };
  put('square.jpg', await solid(300, 300).jpeg().toBuffer());
  put('landscape.png', await solid(400, 200).png().toBuffer());
  put('portrait.webp', await solid(150, 600).webp().toBuffer());
  put('small.gif', await solid(40, 30).gif().toBuffer());
  put(
    'alpha.png',
    await sharp({ create: { width: 64, height: 64, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
      .png()
      .toBuffer(),
  );
  // stored 200 x 100 with EXIF orientation 6: shown (and so stored) as 100 x 200
  put('rotated.jpg', await solid(200, 100).jpeg().withMetadata({ orientation: 6 }).toBuffer());
  put(
    'exif.jpg',
    await solid(100, 100)
      .jpeg()
      .withExif({ IFD0: { Copyright: 'private-location-data' } })
      .toBuffer(),
  );
  put('huge.jpg', await solid(8000, 8000).jpeg().toBuffer());
  const full = await noisy(400, 400).jpeg().toBuffer();
  put('truncated.jpg', full.subarray(0, Math.floor(full.length * 0.6)));
  put('notes.txt', 'this is not an image\n');
  put('empty.jpg', Buffer.alloc(0));
  put(
    'image.svg',
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
  );
  put('toolarge.jpg', Buffer.alloc(10 * 1024 * 1024 + 1, 0xff));
}

const cli = (ctx: TestContext, args: string[]) => adminCli(ctx.config.databaseUrl, args);

before(writeImages);
after(() => rmSync(dir, { recursive: true, force: true }));

for (const dialect of dialects()) {
  describe(`profile photos (${dialect})`, () => {
    let ctx: TestContext;
    let token: string;
    let noPhotoToken: string;
    let userId: number;
    const EPPN = 'alice@example.org';

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      const user = await seedUser(ctx, 1, EPPN, { name: 'Alice' });
      userId = user.id;
      const photoClient = await seedClient(ctx, { groups: ['userinfo-photo'], redirectUris: [REDIRECT] });
      const nameClient = await seedClient(ctx, { groups: ['userinfo-name'], redirectUris: [REDIRECT] });
      // the photo group of the client is what counts, not the scopes of this token
      token = await mintUserToken(ctx, { accountId: user.sub, clientId: photoClient.clientId, scope: 'openid' });
      noPhotoToken = await mintUserToken(ctx, {
        accountId: user.sub,
        clientId: nameClient.clientId,
        scope: 'openid profile',
      });
    });
    after(() => ctx.close());

    const setPhoto = async (file: string) =>
      cli(ctx, ['user', 'set-photo', '--eppn', EPPN, '--file', files[file]!, '--json']);
    const fetchPhoto = (handle: string, headers: Record<string, string> = {}, t: string | null = token) =>
      ctx.app.inject({
        method: 'GET',
        url: `/userinfo/v1/user/media/${handle}`,
        headers: { ...(t ? { authorization: `Bearer ${t}` } : {}), ...headers },
      });
    const currentHandle = async () => (await findUserByEppn(ctx.store.db, EPPN))!.photo_handle;
    const photoRows = async () =>
      (await ctx.store.db.selectFrom('photos').select(['handle']).where('user_id', '=', userId).execute()).map(
        (r) => r.handle,
      );

    const expectations: [string, number, number][] = [
      ['square.jpg', 128, 128],
      ['landscape.png', 128, 64],
      ['portrait.webp', 32, 128],
      ['small.gif', 128, 96],
      ['rotated.jpg', 64, 128],
    ];
    for (const [file, width, height] of expectations) {
      it(`stores ${file} as a ${width} x ${height} JPEG under a new handle, replacing the old photo`, async () => {
        const previous = await currentHandle();
        const res = await setPhoto(file);
        assert.equal(res.code, 0, res.err);
        const stored = JSON.parse(res.out);
        assert.match(stored.handle, /^p:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        assert.notEqual(stored.handle, previous);
        assert.equal(stored.replaced, previous);
        assert.deepEqual([stored.width, stored.height], [width, height]);
        assert.equal(await currentHandle(), stored.handle);
        assert.deepEqual(await photoRows(), [stored.handle]);

        const got = await fetchPhoto(stored.handle);
        assert.equal(got.statusCode, 200);
        assert.equal(got.headers['content-type'], 'image/jpeg');
        const meta = await sharp(got.rawPayload).metadata();
        assert.equal(meta.format, 'jpeg');
        assert.deepEqual([meta.width, meta.height], [width, height]);
        if (previous) assert.equal((await fetchPhoto(previous)).statusCode, 404);
      });
    }

    it('flattens transparency and strips metadata', async () => {
      assert.equal((await setPhoto('alpha.png')).code, 0);
      const alpha = await sharp((await fetchPhoto((await currentHandle())!)).rawPayload).metadata();
      assert.equal(alpha.hasAlpha, false);
      assert.equal((await setPhoto('exif.jpg')).code, 0);
      const got = (await fetchPhoto((await currentHandle())!)).rawPayload;
      assert.equal((await sharp(got).metadata()).exif, undefined);
      assert.ok(!got.includes('private-location-data'));
    });

    const refusals: [string, RegExp][] = [
      ['huge.jpg', /8000 x 8000 pixels; at most 40 megapixels/],
      ['truncated.jpg', /corrupt or truncated/],
      ['notes.txt', /not an image in a supported format/],
      ['empty.jpg', /empty/],
      ['image.svg', /not an image in a supported format/],
      ['toolarge.jpg', /larger than 10 MiB/],
    ];
    for (const [file, message] of refusals) {
      it(`refuses ${file} with a clear message and changes nothing`, async () => {
        const before = await currentHandle();
        const rows = await photoRows();
        const res = await setPhoto(file);
        assert.equal(res.code, 1);
        assert.match(res.err, message);
        assert.ok(res.err.startsWith(`error: ${files[file]}: `), res.err);
        assert.equal(res.out, '');
        assert.equal(await currentHandle(), before);
        assert.deepEqual(await photoRows(), rows);
      });
    }

    it('two uploads at once leave exactly one photo, the one the user points at', async () => {
      const { setPhoto: store } = await import('../../src/directory/photos.ts');
      const user = (await findUserByEppn(ctx.store.db, EPPN))!;
      const images = await Promise.all([
        solid(200, 200).png().toBuffer(),
        solid(300, 100).png().toBuffer(),
        solid(100, 300).png().toBuffer(),
      ]);
      await Promise.all(images.map((image) => store(ctx.store, user, image)));
      const rows = await photoRows();
      assert.equal(rows.length, 1);
      assert.deepEqual(rows, [await currentHandle()]);
    });

    it('refuses a missing file and an unknown user', async () => {
      const missing = await cli(ctx, ['user', 'set-photo', '--eppn', EPPN, '--file', join(dir, 'nope.jpg')]);
      assert.equal(missing.code, 1);
      assert.match(missing.err, /no such file/);
      const nobody = await cli(ctx, [
        'user',
        'set-photo',
        '--eppn',
        'nobody@example.org',
        '--file',
        files['square.jpg']!,
      ]);
      assert.equal(nobody.code, 1);
      assert.match(nobody.err, /user 'nobody@example.org' does not exist/);
      const noArgs = await cli(ctx, ['user', 'set-photo', '--eppn', EPPN]);
      assert.equal(noArgs.code, 1);
      assert.match(noArgs.err, /--file is required/);
    });

    describe('GET /userinfo/v1/user/media/<handle>', () => {
      let handle: string;
      before(async () => {
        assert.equal((await setPhoto('square.jpg')).code, 0);
        handle = (await currentHandle())!;
      });

      it('answers 200 image/jpeg with ETag, Last-Modified and Cache-Control', async () => {
        const res = await fetchPhoto(handle);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'image/jpeg');
        assert.match(String(res.headers.etag), /^"[A-Za-z0-9_-]+"$/);
        assert.ok(!Number.isNaN(Date.parse(String(res.headers['last-modified']))));
        assert.equal(res.headers['cache-control'], 'private, max-age=3600');
        assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
        // the handle is also the tail of the picture claim
        const claims = (
          await ctx.app.inject({
            method: 'GET',
            url: '/openid/userinfo',
            headers: {
              authorization: `Bearer ${await mintUserToken(ctx, { accountId: (await findUserByEppn(ctx.store.db, EPPN))!.sub, clientId: (await ctx.provider.current().AccessToken.find(token))!.clientId!, scope: 'openid profile' })}`,
            },
          })
        ).json();
        assert.equal(claims.picture, `${PUBLIC_URL}/userinfo/v1/user/media/${handle}`);
      });

      it('answers HEAD like GET, without a body', async () => {
        const res = await ctx.app.inject({
          method: 'HEAD',
          url: `/userinfo/v1/user/media/${handle}`,
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['content-type'], 'image/jpeg');
        assert.equal(res.body, '');
      });

      it('accepts the handle percent-encoded and in upper case', async () => {
        assert.equal((await fetchPhoto(handle.replace(':', '%3A'))).statusCode, 200);
        assert.equal((await fetchPhoto(`p:${handle.slice(2).toUpperCase()}`)).statusCode, 200);
      });

      it('304 on a matching If-None-Match (strong, weak, in a list, or *)', async () => {
        const etag = String((await fetchPhoto(handle)).headers.etag);
        for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
          const res = await fetchPhoto(handle, { 'if-none-match': inm });
          assert.equal(res.statusCode, 304, inm);
          assert.equal(res.body, '');
          assert.equal(res.headers.etag, etag);
          assert.equal(res.headers['cache-control'], 'private, max-age=3600');
        }
      });

      it('304 on If-Modified-Since at or after Last-Modified; 200 before it', async () => {
        const lastModified = String((await fetchPhoto(handle)).headers['last-modified']);
        assert.equal((await fetchPhoto(handle, { 'if-modified-since': lastModified })).statusCode, 304);
        assert.equal(
          (await fetchPhoto(handle, { 'if-modified-since': new Date(Date.parse(lastModified) + 60_000).toUTCString() }))
            .statusCode,
          304,
        );
        assert.equal(
          (await fetchPhoto(handle, { 'if-modified-since': new Date(Date.parse(lastModified) - 60_000).toUTCString() }))
            .statusCode,
          200,
        );
        assert.equal((await fetchPhoto(handle, { 'if-modified-since': 'not a date' })).statusCode, 200);
      });

      it('200 when If-None-Match does not match, even with a matching If-Modified-Since', async () => {
        const lastModified = String((await fetchPhoto(handle)).headers['last-modified']);
        const res = await fetchPhoto(handle, { 'if-none-match': '"stale"', 'if-modified-since': lastModified });
        assert.equal(res.statusCode, 200);
      });

      it('404 for a well-formed handle that does not exist', async () => {
        const res = await fetchPhoto('p:00000000-0000-4000-8000-000000000000');
        assert.equal(res.statusCode, 404);
        assert.deepEqual(res.json(), { code: 404, message: 'Photo does not exist' });
      });

      it('400 for a handle not of the form p:<uuid>', async () => {
        for (const bad of ['abc', 'p:', 'p:not-a-uuid', `${handle}x`, `q:${handle.slice(2)}`, handle.slice(2)]) {
          const res = await fetchPhoto(bad);
          assert.equal(res.statusCode, 400, bad);
          assert.equal(res.json().code, 400);
          assert.match(res.json().message, /Invalid photo handle/);
        }
        // a NUL in any path parameter is the request guard's
        assert.deepEqual((await fetchPhoto('%00')).json(), { code: 400, message: 'Request contains a NUL character' });
      });

      it('401 without a token, with a Bearer challenge; 401 invalid_token for a bad or expired token', async () => {
        const none = await fetchPhoto(handle, {}, null);
        assert.equal(none.statusCode, 401);
        assert.equal(none.headers['www-authenticate'], `Bearer realm="${PUBLIC_URL}"`);
        const at = await ctx.provider.current().AccessToken.find(token);
        const expired = await mintUserToken(ctx, {
          accountId: at!.accountId,
          clientId: at!.clientId!,
          scope: 'openid',
          expiresIn: -5,
        });
        for (const t of ['garbage', expired]) {
          const res = await fetchPhoto(handle, {}, t);
          assert.equal(res.statusCode, 401);
          assert.match(String(res.headers['www-authenticate']), /error="invalid_token"/);
        }
      });

      it('401 comes before 400: an unauthenticated caller learns nothing about handles', async () => {
        assert.equal((await fetchPhoto('abc', {}, null)).statusCode, 401);
      });

      it('403 insufficient_scope when the client does not hold userinfo-photo', async () => {
        const res = await fetchPhoto(handle, {}, noPhotoToken);
        assert.equal(res.statusCode, 403);
        assert.match(String(res.headers['www-authenticate']), /error="insufficient_scope"/);
        assert.deepEqual(res.json(), {
          code: 403,
          message: 'Client is not authorized for the userinfo-photo attribute group',
        });
      });

      it('other methods: 405 with Allow', async () => {
        const res = await ctx.app.inject({
          method: 'POST',
          url: `/userinfo/v1/user/media/${handle}`,
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(res.statusCode, 405);
        assert.equal(res.headers.allow, 'GET, HEAD');
      });

      it('user remove-photo deletes the photo and the picture claim', async () => {
        const res = await cli(ctx, ['user', 'remove-photo', '--eppn', EPPN, '--json']);
        assert.equal(res.code, 0, res.err);
        assert.deepEqual(JSON.parse(res.out), { eppn: EPPN, removed: handle });
        assert.equal(await currentHandle(), null);
        assert.deepEqual(await photoRows(), []);
        assert.equal((await fetchPhoto(handle)).statusCode, 404);
      });
    });
  });
}
