// /device without a session: a code sent after the session cookie went, or a resume link opened in a
// browser that never started the sign-in. oidc-provider answers with the user-code form again and a
// fresh anti-forgery secret in a session it never saved (a 500 before). The page is a 400 with the
// form, and that form works: sent back with its cookie, the code is looked up. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { dialects, startTestApp, type TestContext } from '../helpers.ts';

const FORM = 'application/x-www-form-urlencoded';

/** The session cookie the answer sets (with its signature), as a Cookie header. */
function sessionCookie(res: LightMyRequestResponse): string {
  const cookies = res.cookies.filter((c) => /session(\.sig)?$/.test(c.name) && c.value);
  assert.equal(cookies.length, 2, `a signed session cookie: ${JSON.stringify(res.headers['set-cookie'])}`);
  return cookies.map((c) => `${c.name}=${c.value}`).join('; ');
}

function xsrfOf(page: string): string {
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(page)?.[1];
  assert.ok(xsrf, 'the page has the form with its anti-forgery field');
  return xsrf;
}

for (const dialect of dialects()) {
  describe(`device pages without a session (${dialect})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await startTestApp(dialect, { PUBLIC_URL: 'http://localhost:8080' });
    });
    after(() => ctx?.close());

    /** The form of `page`, sent back with its session: an unknown code is now a wrong code. */
    async function formWorks(page: LightMyRequestResponse) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/device',
        headers: { 'content-type': FORM, cookie: sessionCookie(page) },
        payload: new URLSearchParams({ xsrf: xsrfOf(page.body), user_code: 'BCDF-GHJK' }).toString(),
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.body, /That code is not valid/);
    }

    function formPage(res: LightMyRequestResponse) {
      assert.equal(res.statusCode, 400, res.body);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      assert.match(res.body, /The sign-in on your device could not be completed/);
      assert.match(res.body, /name="user_code"/);
    }

    it('GET /device/<uid> with no sign-in behind it: the code form, a 400, that works', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/device/xx' });
      formPage(res);
      await formWorks(res);
    });

    it('POST /device with no session: the code form, a 400, that works', async () => {
      for (const payload of ['user_code=BCDF-GHJK', 'xsrf=forged&user_code=BCDF-GHJK', '']) {
        const res = await ctx.app.inject({
          method: 'POST',
          url: '/device',
          headers: { 'content-type': FORM },
          payload,
        });
        formPage(res);
        await formWorks(res);
      }
    });

    it('a form sent with a stale session cookie: the code form again, that works', async () => {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/device',
        headers: { 'content-type': FORM, cookie: '_session=gone; _session.sig=forged' },
        payload: 'xsrf=x&user_code=BCDF-GHJK',
      });
      formPage(res);
      await formWorks(res);
    });
  });
}
