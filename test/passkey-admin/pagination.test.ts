import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  PUBLIC_URL,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { passkeyRow, secondInstance, seedPasskeys, nextLink } from './fixtures.ts';

const EXPIRED = "Invalid 'offset' query parameter -- token has expired";
const OFFSET_ERROR = /^Invalid 'offset' query parameter -- .+/;

type Inject = TestContext['app']['inject'];

for (const dialect of dialects()) {
  describe(`passkey list pagination (${dialect})`, () => {
    let ctx: TestContext;
    let token: string;
    let ids: number[]; // organization 1, ascending
    let userIds: number[];
    let heavyUserKeys: number[]; // passkeys of user0 (many)

    const get = (url: string, app: { inject: Inject } = ctx.app, t = token) =>
      app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${t}` } });

    /** Follows Link headers from url; returns every page's ids. */
    async function walk(
      url: string,
      app: { inject: Inject } = ctx.app,
      between?: (page: number) => Promise<void>,
    ): Promise<number[][]> {
      const pages: number[][] = [];
      let next: string | undefined = url;
      while (next) {
        const res = await get(next, app);
        assert.equal(res.statusCode, 200, res.body);
        pages.push(res.json().map((p: { id: number }) => p.id));
        next = nextLink(res.headers.link, PUBLIC_URL);
        if (next && between) await between(pages.length);
        assert.ok(pages.length < 1000, 'walk does not end');
      }
      return pages;
    }

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other');
      userIds = [];
      for (let i = 0; i < 50; i++) userIds.push((await seedUser(ctx, 1, `user${i}@example.org`)).id);
      const other = await seedUser(ctx, 2, 'x@other.org');
      // 2,450 round robin over 50 users, then 50 more for user0: 2,500 in organization 1
      ids = await seedPasskeys(ctx.store, 1, userIds, 2450);
      ids.push(...(await seedPasskeys(ctx.store, 1, [userIds[0]!], 50)));
      await seedPasskeys(ctx.store, 2, [other.id], 30);
      heavyUserKeys = ids.filter((_, i) => (i < 2450 ? i % 50 === 0 : true));
      const c = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1, 2] });
      token = await clientToken(ctx, c.clientId, c.secret, 'passkey.read passkey.delete');
    });
    after(() => ctx.close());

    it('walks 2,500 passkeys in three pages of per_page=1000, each exactly once, no Link on the last', async () => {
      const pages = await walk('/2/passkey/1?per_page=1000');
      assert.deepEqual(
        pages.map((p) => p.length),
        [1000, 1000, 500],
      );
      assert.deepEqual(pages.flat(), ids);
    });

    it('uses 1000 per page by default and carries the original query plus offset in an absolute Link', async () => {
      const first = await get('/2/passkey/1');
      assert.equal(first.json().length, 1000);
      assert.match(
        String(first.headers.link),
        /^<https:\/\/idp\.example\.test\/2\/passkey\/1\?offset=[A-Za-z0-9_-]+>; rel="next"$/,
      );
      // leading zeros name the same organization; the Link uses its canonical id
      const padded = await get('/2/passkey/0001?per_page=5');
      assert.equal(padded.statusCode, 200);
      assert.match(String(padded.headers.link), /^<https:\/\/idp\.example\.test\/2\/passkey\/1\?per_page=5&offset=/);
      const withQuery = await get('/2/passkey/1?per_page=7&eppn=User0%40example.org');
      assert.match(
        String(withQuery.headers.link),
        /^<https:\/\/idp\.example\.test\/2\/passkey\/1\?per_page=7&eppn=User0%40example\.org&offset=[A-Za-z0-9_-]+>; rel="next"$/,
      );
    });

    it('has no empty trailing page when the count is a multiple of per_page', async () => {
      const pages = await walk('/2/passkey/1?per_page=500');
      assert.deepEqual(
        pages.map((p) => p.length),
        [500, 500, 500, 500, 500],
      );
      const one = await walk(`/2/passkey/1?eppn=user1%40example.org&per_page=49`);
      assert.deepEqual(
        one.map((p) => p.length),
        [49],
      );
    });

    it("walks one user's passkeys", async () => {
      const pages = await walk('/2/passkey/1?eppn=user0%40example.org&per_page=40');
      assert.deepEqual(
        pages.map((p) => p.length),
        [40, 40, 19],
      );
      assert.deepEqual(pages.flat(), heavyUserKeys);
    });

    it('per_page=1 walks one at a time', async () => {
      const pages = await walk('/2/passkey/1?eppn=user2%40example.org&per_page=1');
      assert.equal(pages.length, 49);
      assert.ok(pages.every((p) => p.length === 1));
    });

    it('sees every passkey that existed for the whole walk exactly once while others are added and deleted', async () => {
      const before = (await walk('/2/passkey/1?per_page=1000')).flat();
      const deleted = new Set<number>();
      const added: number[] = [];
      let round = 0;
      const churn = async () => {
        round++;
        // delete a few passkeys ahead of the walk and a few behind it, and add some
        const victims = [before[(round * 97) % before.length]!, before[(round * 389 + 1500) % before.length]!].filter(
          (id) => !deleted.has(id),
        );
        const [newIds] = await Promise.all([
          insertPasskeys(
            ctx.store.db,
            Array.from({ length: 20 }, (_, i) => passkeyRow(userIds[(round + i) % userIds.length]!, 1)),
          ),
          ...victims.map(async (id) => {
            const res = await ctx.app.inject({
              method: 'DELETE',
              url: `/2/passkey/1/${id}`,
              headers: { authorization: `Bearer ${token}` },
            });
            assert.equal(res.statusCode, 200, res.body);
            deleted.add(id);
          }),
        ]);
        added.push(...newIds);
      };
      // churn between pages, and concurrently with each page request
      const pages: number[][] = [];
      let next: string | undefined = '/2/passkey/1?per_page=100';
      while (next) {
        const [res]: [Awaited<ReturnType<typeof get>>, void] = await Promise.all([get(next), churn()]);
        const body: { id: number }[] = res.json();
        assert.equal(res.statusCode, 200, res.body);
        pages.push(body.map((p) => p.id));
        next = nextLink(res.headers.link, PUBLIC_URL);
        if (next) await churn();
      }
      const seen = pages.flat();
      assert.equal(new Set(seen).size, seen.length, 'no passkey twice');
      const survivors = before.filter((id) => !deleted.has(id));
      const seenSet = new Set(seen);
      for (const id of survivors) assert.ok(seenSet.has(id), `passkey ${id} existed throughout but was not seen`);
      for (const id of seen) assert.ok(before.includes(id) || added.includes(id), `unknown passkey ${id}`);
      assert.ok(deleted.size > 20 && added.length > 200);
    });

    describe('offset token', () => {
      let link: string;
      before(async () => {
        link = nextLink((await get('/2/passkey/1?per_page=100')).headers.link, PUBLIC_URL)!;
      });
      const offsetOf = (url: string) => new URL(url, PUBLIC_URL).searchParams.get('offset')!;
      const expect400 = async (url: string, message: string | RegExp = OFFSET_ERROR) => {
        const res = await get(url);
        assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
        const body = res.json();
        assert.equal(body.code, 400);
        if (typeof message === 'string') assert.equal(body.message, message);
        else assert.match(body.message, message);
      };

      it('is accepted as returned', async () => {
        assert.equal((await get(link)).statusCode, 200);
        assert.equal((await get(link)).statusCode, 200, 'and again: it is a position, not a one-time ticket');
      });

      it('rejects every single altered character', async () => {
        const offset = offsetOf(link);
        const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
        for (let i = 0; i < offset.length; i++) {
          const c = alphabet[(alphabet.indexOf(offset[i]!) + 1) % alphabet.length]!;
          const altered = offset.slice(0, i) + c + offset.slice(i + 1);
          // The last character carries spare bits in base64url: some changes decode to the same bytes.
          if (Buffer.from(altered, 'base64url').equals(Buffer.from(offset, 'base64url'))) continue;
          await expect400(
            `/2/passkey/1?per_page=100&offset=${altered}`,
            "Invalid 'offset' query parameter -- token is malformed or has been altered",
          );
        }
        await expect400(`/2/passkey/1?per_page=100&offset=${offset.slice(0, -1)}`);
        await expect400(`/2/passkey/1?per_page=100&offset=${offset}A`);
        await expect400(`/2/passkey/1?per_page=100&offset=${offset.slice(0, 20)}`);
      });

      it('is bound to its request: another per_page, eppn, organization or path is a 400', async () => {
        const offset = offsetOf(link);
        const msg = "Invalid 'offset' query parameter -- token was issued for a different request";
        await expect400(`/2/passkey/1?per_page=99&offset=${offset}`, msg);
        await expect400(`/2/passkey/1?offset=${offset}`, msg);
        await expect400(`/2/passkey/1?per_page=1000&offset=${offset}`, msg);
        await expect400(`/2/passkey/1?per_page=100&eppn=user0%40example.org&offset=${offset}`, msg);
        await expect400(`/2/passkey/2?per_page=100&offset=${offset}`, msg);
        // a user's token is not valid for another user, nor for the organization list
        const userLink = nextLink(
          (await get('/2/passkey/1?per_page=10&eppn=user0%40example.org')).headers.link,
          PUBLIC_URL,
        )!;
        const userOffset = offsetOf(userLink);
        await expect400(`/2/passkey/1?per_page=10&eppn=user1%40example.org&offset=${userOffset}`, msg);
        await expect400(`/2/passkey/1?per_page=10&offset=${userOffset}`, msg);
        // the same eppn in another case is the same user, and the same request
        assert.equal(
          (await get(`/2/passkey/1?per_page=10&eppn=USER0%40Example.org&offset=${userOffset}`)).statusCode,
          200,
        );
        // on a delete it is not a parameter at all
        const del = await ctx.app.inject({
          method: 'DELETE',
          url: `/2/passkey/1?eppn=user0%40example.org&offset=${userOffset}`,
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(del.statusCode, 400);
        assert.equal(del.json().message, "Unknown query parameter 'offset'");
      });

      it('is accepted by another instance sharing the database and secret', async () => {
        const second = await secondInstance(ctx);
        try {
          const a = await get(link);
          const b = await get(link, second.app);
          assert.equal(b.statusCode, 200, b.body);
          assert.deepEqual(b.json(), a.json());
          // and a whole walk can hop between instances
          const pages: number[][] = [];
          let next: string | undefined = '/2/passkey/1?per_page=700';
          let i = 0;
          while (next) {
            const res = await get(next, i++ % 2 ? second.app : ctx.app);
            pages.push(res.json().map((p: { id: number }) => p.id));
            next = nextLink(res.headers.link, PUBLIC_URL);
          }
          const all = pages.flat();
          assert.equal(new Set(all).size, all.length);
          assert.deepEqual(
            all,
            [...all].sort((x, y) => x - y),
          );
        } finally {
          await second.close();
        }
      });

      it('expires after PAGINATION_TOKEN_TTL (300 s by default), by the clock', async () => {
        let now = Date.now();
        const clocked = await secondInstance(ctx, () => now);
        try {
          const res = await get('/2/passkey/1?per_page=100', clocked.app);
          const next = nextLink(res.headers.link, PUBLIC_URL)!;
          now += 299_000;
          assert.equal((await get(next, clocked.app)).statusCode, 200);
          now += 1_000;
          const expired = await get(next, clocked.app);
          assert.equal(expired.statusCode, 400);
          assert.deepEqual(expired.json(), { code: 400, message: EXPIRED });
        } finally {
          await clocked.close();
        }
      });

      it('expires after a configured PAGINATION_TOKEN_TTL', async () => {
        const short = await startTestApp(dialect, { PAGINATION_TOKEN_TTL: '1' });
        try {
          await seedOrg(short, 1, 'example.org');
          const u = await seedUser(short, 1, 'a@example.org');
          await seedPasskeys(short.store, 1, [u.id], 3);
          const c = await seedClient(short, { scopes: ['passkey.read'], orgs: [1] });
          const t = await clientToken(short, c.clientId, c.secret, 'passkey.read');
          const first = await get('/2/passkey/1?per_page=1', short.app, t);
          const next = nextLink(first.headers.link, PUBLIC_URL)!;
          await new Promise((r) => setTimeout(r, 1100));
          const res = await get(next, short.app, t);
          assert.equal(res.statusCode, 400);
          assert.equal(res.json().message, EXPIRED);
        } finally {
          await short.close();
        }
      });
    });
  });
}
