// Security notifications through a real SMTP server: each change to how an account signs in is
// told to its user, whoever made it and through whichever surface, staff named by role only; a
// change that rolls back tells nothing; no mail server, nothing queued. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cli,
  cookieBrowser,
  dialects,
  p256Credential,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { setUserLanguage } from '../../src/store/mail.ts';
import { removeOrganizationPasskey, removeOwnPasskey } from '../../src/webauthn/passkey-removal.ts';
import { removePassword } from '../../src/directory/index.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { createRecoveryLink } from '../../src/webauthn/recovery-links.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { enableSecurityNotifications } from '../../src/audit/notifications.ts';
import { createScimToken } from '../../src/directory/provisioning.ts';
import { startSmtp, type TestSmtp } from './smtp.ts';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

async function addPasskey(ctx: TestContext, user: { id: number; org_id: number }, name: string) {
  const [id] = await insertPasskeys(ctx.store.db, [
    {
      user_id: user.id,
      org_id: user.org_id,
      credential_id: Buffer.from(name),
      public_key: p256Credential().cose,
      sign_count: 0,
      transports: '[]',
      label: name,
      aaguid: ZERO_AAGUID,
      backup_eligible: 0,
      backup_state: 0,
      mfa_verified: 1,
      created_at: Date.now(),
      last_used_at: null,
    },
  ]);
  return id!;
}

for (const dialect of dialects()) {
  describe(`security notifications (${dialect})`, () => {
    let ctx: TestContext;
    let smtp: TestSmtp;
    const env = () => ({ SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' });

    before(async () => {
      smtp = await startSmtp();
      ctx = await startTestApp(dialect, env());
      await seedOrg(ctx);
    });

    after(async () => {
      await ctx?.close();
      await smtp?.stop();
    });

    /** the next message to address, at most 10 s away */
    async function next(address: string, seen: number) {
      const until = Date.now() + 10_000;
      while (smtp.to(address).length <= seen) {
        if (Date.now() > until) throw new Error(`no message to ${address}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return smtp.to(address)[seen]!;
    }

    it('a passkey removed by the API, by a helpdesk, by the user; each says by whom', async () => {
      const ada = await seedUser(ctx, 1, 'ada@example.org', { email: 'ada@mail.example' });
      const staff = await seedUser(ctx, 1, 'grace@example.org', { email: 'grace@mail.example' });
      await grantRole(ctx.store, { eppn: staff.eppn, role: 'helpdesk', orgId: 1 });
      const [k1, k2, k3] = [
        await addPasskey(ctx, ada, 'a'),
        await addPasskey(ctx, ada, 'b'),
        await addPasskey(ctx, ada, 'c'),
      ];

      await removeOrganizationPasskey(ctx.store, { clientId: 'hr-app', at: Date.now() }, 1, k1);
      let m = await next('ada@mail.example', 0);
      assert.equal(m.subject, 'A passkey was removed from your account');
      assert.match(m.text, /By: an application your organization uses/);
      assert.match(m.text, /If it was not, contact your helpdesk at once/);

      await removeOrganizationPasskey(ctx.store, { who: { type: 'user', id: staff.eppn }, at: Date.now() }, 1, k2);
      m = await next('ada@mail.example', 1);
      assert.match(m.text, /By: your organization’s helpdesk/);
      assert.ok(!m.text.includes('grace') && !m.html.includes('grace'), 'staff are named by role only');

      await setUserLanguage(ctx.store.db, ada.id, 'nb');
      await removeOwnPasskey(ctx.store, { at: Date.now() }, ada, k3);
      m = await next('ada@mail.example', 2);
      assert.equal(m.subject, 'En passnøkkel ble fjernet fra kontoen din');
      assert.equal(m.lang, 'nb');
      assert.match(m.text, /Av: deg/);
    });

    it('the password set (CLI) and removed; a recovery link made by an operator', async () => {
      const bob = await seedUser(ctx, 1, 'bob@example.org', {
        email: 'bob@mail.example',
        password: 'initial password 1',
      });
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(smtp.to('bob@mail.example').length, 0, 'the password an account is made with is no change');
      const set = await cli(
        ctx.config.databaseUrl,
        ['user', 'set-password', '--eppn', bob.eppn, '--password-stdin'],
        'another password 2\n',
        env(),
      );
      assert.equal(set.code, 0, set.err);
      let m = await next('bob@mail.example', 0);
      assert.equal(m.subject, 'Your password was changed');
      assert.match(m.text, /By: the service’s operators/);
      assert.match(m.text, /bob@example\.org/);

      await addPasskey(ctx, bob, 'bob-key');
      await removePassword(ctx.store, bob.id, { actor: { type: 'user', id: bob.eppn } });
      m = await next('bob@mail.example', 1);
      assert.equal(m.subject, 'Your password was removed');
      assert.match(m.text, /By: you/);

      const made = await cli(ctx.config.databaseUrl, ['recovery', 'create', bob.eppn, '--json'], '', env());
      assert.equal(made.code, 0, made.err);
      m = await next('bob@mail.example', 2);
      assert.equal(m.subject, 'A recovery link was made for your account');
      const url = JSON.parse(made.out).url as string;
      assert.ok(!m.text.includes(url.split('/').pop()!), 'the notice never carries the link');
    });

    it('an e-mail address changed by the CLI, SCIM or an import is told at the old address and the new', async () => {
      const notices = (address: string) =>
        smtp.to(address).filter((m) => m.subject === 'The e-mail address of your account was changed');
      const wait = async (address: string, n: number) => {
        const until = Date.now() + 10_000;
        while (notices(address).length < n) {
          if (Date.now() > until) throw new Error(`no address notice to ${address}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        return notices(address).at(-1)!;
      };
      const eve = await seedUser(ctx, 1, 'eve@example.org', { email: 'eve@old.example' });
      // the CLI (setUserAttributes)
      const set = await cli(ctx.config.databaseUrl, ['user', 'set', eve.eppn, '--email', 'eve@new.example'], '', env());
      assert.equal(set.code, 0, set.err);
      let old = await wait('eve@old.example', 1);
      const fresh = await wait('eve@new.example', 1);
      assert.match(old.text, /The e-mail address of your account eve@example\.org was changed/);
      assert.match(old.text, /By: the service’s operators/);
      assert.match(old.text, /sent by .* to eve@old\.example/, 'the footer names the address it went to');
      assert.ok(!old.text.includes('eve@new.example'), 'the old address is not told the new one');
      assert.match(fresh.text, /eve@example\.org/);

      // SCIM (provisioning's one writer, which the LDAP sync shares)
      const { token } = await createScimToken(ctx.store, 1, 'hr');
      const patch = await ctx.app.inject({
        method: 'PATCH',
        url: `/scim/v2/Users/${eve.sub}`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/scim+json' },
        payload: {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'replace', path: 'emails', value: [{ value: 'eve@scim.example', primary: true }] }],
        },
      });
      assert.equal(patch.statusCode, 200, patch.body);
      old = await wait('eve@new.example', 2);
      assert.match(old.text, /By: an application your organization uses|By: your organization’s user directory/);
      await wait('eve@scim.example', 1);

      // the user import (its batch's transaction)
      const file = join(mkdtempSync(join(tmpdir(), 'import-')), 'users.jsonl');
      writeFileSync(file, `${JSON.stringify({ eppn: eve.eppn, name: 'eve', email: 'eve@import.example' })}\n`);
      const imported = await cli(ctx.config.databaseUrl, ['user', 'import', file, '--org', '1'], '', env());
      assert.equal(imported.code, 0, imported.err);
      await wait('eve@scim.example', 2);
      await wait('eve@import.example', 1);

      // a change that leaves the address as it was tells nothing
      const again = await cli(
        ctx.config.databaseUrl,
        ['user', 'set', eve.eppn, '--email', 'EVE@import.example'],
        '',
        env(),
      );
      assert.equal(again.code, 0, again.err);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(notices('eve@import.example').length, 1);
    });

    it('a change that rolls back tells nothing; users without an address are skipped', async () => {
      const carol = await seedUser(ctx, 1, 'carol@example.org', { email: 'carol@mail.example' });
      const before = await ctx.store.db.selectFrom('event_deliveries').select('id').execute();
      await assert.rejects(
        createRecoveryLink(ctx.store, ctx.config.publicUrl, {
          eppn: carol.eppn,
          within: async () => {
            throw new Error('rolled back');
          },
        }),
      );
      const dan = await seedUser(ctx, 1, 'dan@example.org');
      await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: dan.eppn });
      const after = await ctx.store.db.selectFrom('event_deliveries').select('id').execute();
      assert.equal(after.length, before.length, 'nothing queued');
    });

    it("a signed-in user's language choice is their messages' language", async () => {
      const lena = await seedUser(ctx, 1, 'lena@example.org', {
        email: 'lena@mail.example',
        password: 'lena password 123',
      });
      const b = cookieBrowser(ctx.app);
      const page = await b.get('/account');
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
      const login = await b.post('/account/login', { _csrf: csrf, username: lena.eppn, password: 'lena password 123' });
      assert.equal(login.statusCode, 303, login.body.slice(0, 200));
      assert.equal((await b.get('/language/nb')).statusCode, 303);
      const row = await ctx.store.db
        .selectFrom('users')
        .select('language')
        .where('id', '=', lena.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.language, 'nb');
      const anonymous = await cookieBrowser(ctx.app).get('/language/en');
      assert.equal(anonymous.statusCode, 303, 'without a session only the cookie is set');
      await cli(
        ctx.config.databaseUrl,
        ['user', 'set-password', '--eppn', lena.eppn, '--password-stdin'],
        'new lena password 4\n',
        env(),
      );
      const m = await next('lena@mail.example', 0);
      assert.equal(m.subject, 'Passordet ditt ble endret');
    });

    it('nothing is queued where no mail server is configured', async () => {
      enableSecurityNotifications(false);
      try {
        const erin = await seedUser(ctx, 1, 'erin@example.org', { email: 'erin@mail.example' });
        await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: erin.eppn });
        const rows = await ctx.store.db
          .selectFrom('event_deliveries')
          .select('id')
          .where('subject', '=', erin.eppn)
          .where('destination', 'like', 'mail:%')
          .execute();
        assert.equal(rows.length, 0);
      } finally {
        enableSecurityNotifications(true);
      }
    });
  });
}
