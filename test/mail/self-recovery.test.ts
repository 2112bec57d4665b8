// "Lost your passkey?" over real HTTP with a real SMTP server: the link is offered only where a
// policy allows it, the answer is the same for existing and unknown accounts, the link arrives in
// the page's language and registers a passkey once, the form is CSRF-protected and rate-limited
// per name and per client address; with the policy off nothing is sent. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects, pickFreePort, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { LOST_PASSKEY_NAME_LIMIT } from '../../src/web/lost-passkey.ts';
import { csrfOf, httpBrowser, linkIn, registerThroughLink, startSmtp, type TestSmtp } from './smtp.ts';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** the page's main text, without the per-request CSRF token */
const mainOf = (body: string) => /<main[\s\S]*<\/main>/.exec(body)?.[0].replace(/value="[^"]*"/g, '') ?? body;

for (const dialect of dialects()) {
  describe(`self-service recovery by e-mail (${dialect})`, () => {
    let ctx: TestContext;
    let smtp: TestSmtp;
    let base: string;
    let offset = 0;
    const env = () => ({ SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' });

    before(async () => {
      smtp = await startSmtp();
      const port = await pickFreePort();
      ctx = await startTestApp(
        dialect,
        { ...env(), EVENTS_RETRY_BASE_MS: '100' },
        {
          listen: port,
          now: () => Date.now() + offset,
        },
      );
      base = `http://127.0.0.1:${port}`;
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'closed.org', 'Closed College');
      await seedUser(ctx, 1, 'ada@example.org', { email: 'ada@mail.example' });
      await seedUser(ctx, 1, 'bob@example.org', { email: 'bob@mail.example' });
      await seedUser(ctx, 1, 'grace@example.org', { email: 'grace@mail.example' });
      await grantRole(ctx.store, { eppn: 'grace@example.org', role: 'helpdesk', orgId: 1 });
      await seedUser(ctx, 2, 'olav@closed.org', { email: 'olav@mail.example' });
    });

    after(async () => {
      await ctx?.close();
      await smtp?.stop();
    });

    async function ask(identifier: string, headers: Record<string, string> = {}) {
      const b = httpBrowser(base);
      const form = await b.get('/lost-passkey', headers);
      assert.equal(form.status, 200);
      return b.postForm('/lost-passkey', { _csrf: csrfOf(form.body), identifier }, headers);
    }

    it('is not offered until an organization allows it; the policy needs a mail server', async () => {
      assert.equal((await httpBrowser(base).get('/lost-passkey')).status, 404);
      const signIn = await httpBrowser(base).get('/account');
      assert.doesNotMatch(signIn.body, /Lost your passkey\?/);
      const refused = await cli(ctx.config.databaseUrl, ['org', 'policy', '1', '--self-recovery', 'email']);
      assert.equal(refused.code, 1);
      assert.match(refused.err, /mail is not configured/);
      const bad = await cli(ctx.config.databaseUrl, ['org', 'policy', '1', '--self-recovery', 'yes'], '', env());
      assert.match(bad.err, /--self-recovery must be email or off/);
      const on = await cli(
        ctx.config.databaseUrl,
        ['org', 'policy', '1', '--self-recovery', 'email', '--json'],
        '',
        env(),
      );
      assert.equal(on.code, 0, on.err);
      assert.equal(JSON.parse(on.out).policy.self_recovery, 'email');
      offset += 30_100; // the sign-in page's answer is kept for 30 s
      const now = await httpBrowser(base).get('/account');
      assert.match(now.body, /<a href="\/lost-passkey">Lost your passkey\?<\/a>/);
    });

    it('answers the same for an account and for none, and sends the link in the page language', async () => {
      const existing = await ask('ada@example.org', { 'accept-language': 'nb' });
      const unknown = await ask('nobody@example.org', { 'accept-language': 'nb' });
      assert.equal((await ask('BOB@mail.example')).status, 200);
      assert.equal(existing.status, 200);
      assert.equal(unknown.status, 200);
      assert.equal(mainOf(existing.body), mainOf(unknown.body), 'the same page');
      assert.match(existing.body, /en lenke på vei/);
      await smtp.waitFor(2);
      const [toAda] = smtp.to('ada@mail.example');
      assert.equal(toAda!.lang, 'nb');
      assert.match(toAda!.subject, /Registrer en ny passnøkkel for Example University/);
      const [toBob] = smtp.to('bob@mail.example');
      assert.equal(toBob!.lang, 'en', 'a name asked for by address');
      const done = await registerThroughLink(base, linkIn(toAda!.text));
      assert.equal(done.status, 200, done.body);
      const twice = await registerThroughLink(base, linkIn(toAda!.text));
      assert.equal(twice.status, 404, 'once');
      const lang = await ctx.store.db
        .selectFrom('users')
        .select('language')
        .where('eppn', '=', 'ada@example.org')
        .executeTakeFirstOrThrow();
      assert.equal(
        lang.language,
        null,
        "an anonymous request's language is for its own message: it never changes the user's own",
      );
    });

    it('sends nothing where the policy is off, to staff, or without a valid form', async () => {
      assert.equal((await ask('olav@closed.org')).status, 200, 'the same answer');
      assert.equal((await ask('grace@example.org')).status, 200);
      const noCsrf = await httpBrowser(base).postForm('/lost-passkey', { identifier: 'bob@example.org' });
      assert.equal(noCsrf.status, 403);
      await pause(1500);
      const links = await ctx.store.db
        .selectFrom('recovery_links as l')
        .innerJoin('users as u', 'u.id', 'l.user_id')
        .select('u.eppn')
        .where('u.eppn', 'in', ['olav@closed.org', 'grace@example.org'])
        .execute();
      assert.equal(links.length, 0);
      assert.equal(smtp.to('olav@mail.example').length + smtp.to('grace@mail.example').length, 0);
    });

    it('a new link revokes the earlier unused ones: only the latest message works', async () => {
      const before = smtp.messages.length;
      const earlierLinks = smtp.to('bob@mail.example').map((m) => linkIn(m.text));
      assert.equal((await ask('bob@example.org')).status, 200);
      await smtp.waitFor(before + 1);
      assert.equal((await ask('bob@example.org')).status, 200);
      await smtp.waitFor(before + 2);
      const toBob = smtp.to('bob@mail.example');
      const [first, second] = toBob.slice(-2).map((m) => linkIn(m.text));
      assert.notEqual(first, second);
      const states = await ctx.store.db
        .selectFrom('recovery_links as l')
        .innerJoin('users as u', 'u.id', 'l.user_id')
        .select(['l.id', 'l.revoked_at', 'l.used_at'])
        .where('u.eppn', '=', 'bob@example.org')
        .orderBy('l.id')
        .execute();
      assert.equal(states.length, 3, 'the earlier test asked once by address');
      assert.deepEqual(
        states.map((l) => l.revoked_at !== null),
        [true, true, false],
        'only the newest is usable',
      );
      for (const link of [...earlierLinks, first!])
        assert.equal((await registerThroughLink(base, link)).status, 404, 'an earlier link no longer works');
      const revokes = await ctx.store.db
        .selectFrom('audit_events')
        .select('details')
        .where('kind', '=', 'recovery_link.revoke')
        .where('eppn', '=', 'bob@example.org')
        .execute();
      assert.equal(revokes.length, 2, 'each revocation is audited');
      const done = await registerThroughLink(base, second!);
      assert.equal(done.status, 200, done.body);
    });

    const clearAddressLimit = () =>
      ctx.store.db.deleteFrom('rate_limits').where('key', 'like', 'lost-passkey-ip%').execute();

    it('is limited per name, existing or not, and per client address', async () => {
      await clearAddressLimit();
      for (const name of ['carl@example.org', 'nobody2@example.org']) {
        for (let i = 0; i < LOST_PASSKEY_NAME_LIMIT; i++) assert.equal((await ask(name)).status, 200);
        const over = await ask(name);
        assert.equal(over.status, 429, name);
        assert.ok(Number(over.headers.get('retry-after')) > 0);
      }
      // the per-address limit: ten an hour from one client address, whatever the names
      await clearAddressLimit();
      let status = 200;
      for (let i = 0; i < 12 && status === 200; i++) status = (await ask(`x${i}@example.org`)).status;
      assert.equal(status, 429);
    });
  });
}
