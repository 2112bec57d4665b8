// Invitations by e-mail through a real SMTP server: who gets one, in which language, with a link
// that registers a passkey once over real HTTP; nothing lost while the mail server is away;
// reminders; and a clear refusal when no mail server is configured. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cli,
  dialects,
  p256Credential,
  pickFreePort,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { setUserLanguage } from '../../src/store/mail.ts';
import { inviteUsers, remindInvited } from '../../src/webauthn/invitations.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { httpBrowser, linkIn, registerThroughLink, startSmtp, type TestSmtp } from './smtp.ts';

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 15_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const mailLines = (body: string) =>
  body
    .split('\n')
    .filter((l) => l.startsWith('idp_mail'))
    .join('\n');

for (const dialect of dialects()) {
  describe(`invitations by e-mail (${dialect})`, () => {
    let ctx: TestContext;
    let smtp: TestSmtp;
    let base: string;
    const env = () => ({ SMTP_URL: smtp.url, SMTP_FROM: 'Example IdP <idp@example.test>' });

    before(async () => {
      smtp = await startSmtp();
      const port = await pickFreePort();
      ctx = await startTestApp(dialect, { ...env(), EVENTS_RETRY_BASE_MS: '100' }, { listen: port });
      base = `http://127.0.0.1:${port}`;
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other College');
      const ada = await seedUser(ctx, 1, 'ada@example.org', { email: 'ada@mail.example' });
      await setUserLanguage(ctx.store.db, ada.id, 'nb');
      await seedUser(ctx, 1, 'bob@example.org', { email: 'bob@mail.example' });
      await seedUser(ctx, 1, 'carol@example.org');
      const dave = await seedUser(ctx, 1, 'dave@example.org', { email: 'dave@mail.example' });
      await ctx.store.db.updateTable('users').set({ disabled_at: Date.now() }).where('id', '=', dave.id).execute();
      const erin = await seedUser(ctx, 1, 'erin@example.org', { email: 'erin@mail.example' });
      await insertPasskeys(ctx.store.db, [
        {
          user_id: erin.id,
          org_id: 1,
          credential_id: Buffer.from('erin-key'),
          public_key: p256Credential().cose,
          sign_count: 0,
          transports: '[]',
          label: 'Key',
          aaguid: ZERO_AAGUID,
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: Date.now(),
          last_used_at: null,
        },
      ]);
      await seedUser(ctx, 2, 'olav@other.org', { email: 'olav@mail.example' });
    });

    after(async () => {
      await ctx?.close();
      await smtp?.stop();
    });

    it('refuses clearly when no mail server is configured', async () => {
      const res = await cli(ctx.config.databaseUrl, ['invite', '--org', '1']);
      assert.equal(res.code, 1);
      assert.match(res.err, /mail is not configured: set SMTP_URL and SMTP_FROM/);
    });

    it('checks its options', async () => {
      for (const [args, message] of [
        [['invite'], /--org/],
        [['invite', '--org', 'x'], /--org must be a positive integer/],
        [['invite', '--org', '99'], /organization 99 does not exist/],
        [['invite', '--org', '1', '--ttl', '40d'], /between 1 minute and 30 days/],
        [['invite', '--org', '1', '--ttl', 'soon'], /duration/],
        [['invite', '--org', '1', '--remind-after', '20d'], /before the link expires/],
        [['invite', '--org', '1', '--lang', 'de'], /--lang must be en or nb/],
        [['invite', '--org', '1', '--remind', '--eppn', 'ada@example.org'], /--remind takes only/],
      ] as const) {
        const res = await cli(ctx.config.databaseUrl, [...args], '', env());
        assert.notEqual(res.code, 0, args.join(' '));
        assert.match(res.err, message, args.join(' '));
      }
    });

    it('--dry-run reports who would get one and sends nothing', async () => {
      const res = await cli(ctx.config.databaseUrl, ['invite', '--org', '1', '--dry-run', '--json'], '', env());
      assert.equal(res.code, 0, res.err);
      const out = JSON.parse(res.out);
      assert.equal(out.queued, 3);
      assert.equal(out.dry_run, true);
      assert.deepEqual(out.invited.sort(), ['ada@example.org', 'bob@example.org', 'erin@example.org']);
      const links = await ctx.store.db.selectFrom('recovery_links').select('id').execute();
      assert.equal(links.length, 0);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(smtp.messages.length, 0);
    });

    it('invites users without a passkey, in their language, with a link that works once', async () => {
      const res = await cli(
        ctx.config.databaseUrl,
        ['invite', '--org', '1', '--without-passkey', '--remind-after', '7d', '--json'],
        '',
        env(),
      );
      assert.equal(res.code, 0, res.err);
      const out = JSON.parse(res.out);
      assert.equal(out.queued, 2);
      assert.equal(out.dry_run, false);
      assert.deepEqual(
        out.skipped.sort((a: { eppn: string }, b: { eppn: string }) => a.eppn.localeCompare(b.eppn)),
        [
          { eppn: 'carol@example.org', reason: 'no_email' },
          { eppn: 'dave@example.org', reason: 'disabled' },
          { eppn: 'erin@example.org', reason: 'has_passkey' },
        ],
      );
      await smtp.waitFor(2);
      const [toAda] = smtp.to('ada@mail.example');
      const [toBob] = smtp.to('bob@mail.example');
      assert.ok(toAda && toBob);
      assert.equal(toAda.lang, 'nb');
      assert.match(toAda.subject, /Lag passnøkkelen din for Example University/);
      assert.equal(toBob.lang, 'en');
      assert.match(toBob.subject, /Create your passkey for Example University/);
      assert.equal(toBob.parsed.from?.text, '"Example IdP" <idp@example.test>');
      // a Message-ID of its own, in the sender's domain
      for (const m of [toAda, toBob]) assert.match(m.parsed.messageId ?? '', /^<[0-9a-f-]{36}@example\.test>$/);
      assert.notEqual(toAda.parsed.messageId, toBob.parsed.messageId);
      const link = linkIn(toBob.text);
      assert.ok(toBob.html.includes(link), 'the HTML part has the link too');
      assert.doesNotMatch(toBob.html, /(src|href)="http(?!s:\/\/idp\.example\.test\/recover\/)/, 'nothing external');
      assert.notEqual(linkIn(toAda.text), link, 'a link per user');

      // the secret is nowhere in the database, the audit trail or the outbox
      const token = link.split('/').pop()!;
      for (const table of [
        'recovery_links',
        'events',
        'event_deliveries',
        'audit_events',
        'mail_invitations',
      ] as const) {
        const rows = await ctx.store.db.selectFrom(table).selectAll().execute();
        assert.ok(!JSON.stringify(rows).includes(token), table);
      }
      const invitations = await ctx.store.db.selectFrom('mail_invitations').selectAll().execute();
      assert.equal(invitations.length, 2);
      assert.ok(
        invitations.every((i) => i.invited_by.startsWith('operator:') && Number(i.remind_after_ms) === 7 * 86400_000),
      );

      const done = await registerThroughLink(base, link);
      assert.equal(done.status, 200, done.body);
      const bob = await ctx.store.db
        .selectFrom('users')
        .select(['id', 'passkey_count'])
        .where('eppn', '=', 'bob@example.org')
        .executeTakeFirstOrThrow();
      assert.equal(Number(bob.passkey_count), 1);
      const again = await httpBrowser(base).get(new URL(link).pathname);
      assert.equal(again.status, 404, 'the link works once');

      // the new passkey and the link's use are notified, in bob's language
      await until('notifications', () => smtp.to('bob@mail.example').length >= 3);
      const subjects = smtp.to('bob@mail.example').map((m) => m.subject);
      assert.ok(subjects.includes('A passkey was added to your account'), subjects.join(' | '));
      assert.ok(subjects.includes('A recovery link was used on your account'), subjects.join(' | '));
      assert.ok(!subjects.includes('A recovery link was made for your account'), 'the invitation is its own notice');
    });

    it('reminds, with a new link, only those who have not acted once the time has come', async () => {
      const early = await cli(ctx.config.databaseUrl, ['invite', '--org', '1', '--remind', '--json'], '', env());
      assert.equal(early.code, 0, early.err);
      assert.equal(JSON.parse(early.out).queued, 0, 'not yet');
      // the invitations were sent eight days ago
      await ctx.store.db
        .updateTable('mail_invitations')
        .set((eb) => ({ invited_at: eb('invited_at', '-', 8 * 86400_000) }))
        .execute();
      const before = smtp.messages.length;
      const res = await cli(ctx.config.databaseUrl, ['invite', '--org', '1', '--remind', '--json'], '', env());
      assert.equal(res.code, 0, res.err);
      const out = JSON.parse(res.out);
      assert.deepEqual(out.invited, ['ada@example.org'], 'bob registered a passkey: no reminder');
      await smtp.waitFor(before + 1);
      const reminder = smtp.to('ada@mail.example').at(-1)!;
      assert.match(reminder.subject, /Påminnelse/);
      const [invitation] = smtp.to('ada@mail.example');
      const first = await httpBrowser(base).get(new URL(linkIn(invitation!.text)).pathname);
      assert.equal(first.status, 404, 'the first link was revoked');
      const twice = await cli(ctx.config.databaseUrl, ['invite', '--org', '1', '--remind', '--json'], '', env());
      assert.equal(JSON.parse(twice.out).queued, 0, 'reminded once');
      const done = await registerThroughLink(base, linkIn(reminder.text));
      assert.equal(done.status, 200, 'the reminder carries a working link');
    });

    it('of parallel reminder runs, exactly one reminds', async () => {
      const zoe = await seedUser(ctx, 1, 'zoe@example.org', { email: 'zoe@mail.example' });
      const setup = { publicUrl: ctx.config.publicUrl, mail: true };
      const sent = await inviteUsers(ctx.store, ctx.keys, setup, {
        orgId: 1,
        eppns: [zoe.eppn],
        remindAfterMs: 60_000,
      });
      assert.equal(sent.queued, 1);
      const again = await inviteUsers(ctx.store, ctx.keys, setup, {
        orgId: 1,
        eppns: [zoe.eppn],
        remindAfterMs: 60_000,
      });
      assert.equal(again.queued, 1);
      const links = await ctx.store.db
        .selectFrom('recovery_links')
        .select(['id', 'revoked_at'])
        .where('user_id', '=', zoe.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        links.map((l) => l.revoked_at !== null),
        [true, false],
        'inviting again revokes the earlier link',
      );
      const later = Date.now() + 120_000;
      const runs = await Promise.allSettled(
        Array.from({ length: 5 }, () => remindInvited(ctx.store, ctx.keys, setup, { orgId: 1 }, { now: later })),
      );
      const reminded = runs.flatMap((r) => (r.status === 'fulfilled' ? r.value.invited : []));
      assert.deepEqual(reminded, ['zoe@example.org']);
      const usable = await ctx.store.db
        .selectFrom('recovery_links')
        .select('id')
        .where('user_id', '=', zoe.id)
        .where('revoked_at', 'is', null)
        .execute();
      assert.equal(usable.length, 1, 'one working link');
      const queued = await ctx.store.db
        .selectFrom('event_deliveries')
        .select('id')
        .where('subject', '=', zoe.eppn)
        .where('destination', '=', 'mail:reminder')
        .execute();
      assert.equal(queued.length, 1, 'one reminder queued');
    });

    it('loses nothing while the mail server is away', async () => {
      const before = smtp.messages.length;
      await smtp.stop();
      for (let i = 0; i < 5; i++) await seedUser(ctx, 2, `user${i}@other.org`, { email: `user${i}@mail.example` });
      const res = await cli(ctx.config.databaseUrl, ['invite', '--org', '2', '--json'], '', env());
      assert.equal(res.code, 0, res.err);
      assert.equal(JSON.parse(res.out).queued, 6);
      // attempts fail and are retried while it is away
      await until('failed attempts', async () => {
        const rows = await ctx.store.db
          .selectFrom('event_deliveries')
          .select(['attempts', 'state'])
          .where('destination', '=', 'mail:invitation')
          .where('state', '=', 'pending')
          .execute();
        return rows.length === 6 && rows.every((r) => r.attempts >= 1);
      });
      const metrics = mailLines((await ctx.app.inject({ method: 'GET', url: '/metrics' })).body);
      assert.match(metrics, /^idp_mail_queue_depth ([6-9]|\d\d)$/m);
      assert.match(metrics, /^idp_mail_sent_total\{kind="invitation",outcome="failed"\} [1-9]/m);
      await smtp.start();
      await until(
        'every invitation',
        () => smtp.messages.slice(before).filter((m) => m.subject.startsWith('Create')).length === 6,
        20_000,
      );
      const to = smtp.messages
        .slice(before)
        .filter((m) => m.subject.startsWith('Create'))
        .map((m) => m.to)
        .sort();
      assert.deepEqual(to, ['olav@mail.example', ...[0, 1, 2, 3, 4].map((i) => `user${i}@mail.example`)]);
      const after = mailLines((await ctx.app.inject({ method: 'GET', url: '/metrics' })).body);
      assert.match(after, /^idp_mail_sent_total\{kind="invitation",outcome="sent"\} [1-9]/m);
    });

    it('gives up at once a message whose user lost their address meanwhile', async () => {
      await smtp.stop();
      const gus = await seedUser(ctx, 2, 'gus@other.org', { email: 'gus@mail.example' });
      const res = await cli(ctx.config.databaseUrl, ['invite', '--org', '2', '--eppn', gus.eppn, '--json'], '', env());
      assert.equal(JSON.parse(res.out).queued, 1);
      const delivery = () =>
        ctx.store.db
          .selectFrom('event_deliveries')
          .select(['state', 'attempts', 'last_error'])
          .where('subject', '=', gus.eppn)
          .where('destination', '=', 'mail:invitation')
          .executeTakeFirstOrThrow();
      await until('a failed attempt', async () => (await delivery()).attempts >= 1);
      await ctx.store.db.updateTable('users').set({ email: null }).where('id', '=', gus.id).execute();
      await smtp.start();
      await until('given up', async () => (await delivery()).state === 'dead');
      assert.equal((await delivery()).last_error, 'the user has no e-mail address');
      const metrics = mailLines((await ctx.app.inject({ method: 'GET', url: '/metrics' })).body);
      assert.match(metrics, /^idp_mail_sent_total\{kind="invitation",outcome="dead"\} [1-9]/m);
      assert.equal(smtp.to('gus@mail.example').length, 0);
      // an operator may send it again once the address is back (events replay)
      await ctx.store.db.updateTable('users').set({ email: 'gus@mail.example' }).where('id', '=', gus.id).execute();
      const id = (
        await ctx.store.db
          .selectFrom('event_deliveries')
          .select('id')
          .where('subject', '=', gus.eppn)
          .where('destination', '=', 'mail:invitation')
          .executeTakeFirstOrThrow()
      ).id;
      const replayed = await cli(ctx.config.databaseUrl, ['events', 'replay', String(id)], '', env());
      assert.equal(replayed.code, 0, replayed.err);
      await until('the replayed message', () => smtp.to('gus@mail.example').length === 1);
    });
  });
}
