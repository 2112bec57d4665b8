// An e-mail address changed in a real OpenLDAP (Debian slapd) reaches the user by the next sync, and
// the user is told at the old address and the new one, through a real SMTP server. SQLite and
// PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, type TestContext } from '../helpers.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { addLdapDirectory } from '../../src/directory/ldap-directories.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { startSmtp, type TestSmtp } from '../mail/smtp.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

const SUBJECT = 'The e-mail address of your account was changed';

for (const dialect of dialects()) {
  describe(`an address changed in the LDAP directory is told at the old address and the new (${dialect})`, () => {
    let ctx: TestContext;
    let slapd: Slapd;
    let smtp: TestSmtp;
    let directoryId = 0;

    before(async () => {
      slapd = await startSlapd({ users: testUsers(3) });
      smtp = await startSmtp();
      ctx = await startTestApp(dialect, { SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' });
      await addOrganization(ctx.store, { id: 1, realm: 'example.org', name: 'Example' });
      const d = await addLdapDirectory(ctx.store, ctx.keys, {
        orgId: 1,
        url: slapd.url,
        bindDn: SERVICE_DN,
        bindPassword: SERVICE_PASSWORD,
        baseDn: PEOPLE,
        filter: '(objectClass=inetOrgPerson)',
      });
      directoryId = d.id;
      await syncLdapDirectory(ctx.store, ctx.keys, directoryId);
    });
    after(async () => {
      await ctx?.close();
      await smtp?.stop();
      await slapd?.stop();
    });

    it('by the sync, once', async () => {
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(smtp.messages.filter((m) => m.subject === SUBJECT).length, 0, 'users created are not told');
      slapd.modify(`dn: uid=user00002,${PEOPLE}\nchangetype: modify\nreplace: mail\nmail: moved@elsewhere.example\n`);
      await syncLdapDirectory(ctx.store, ctx.keys, directoryId);
      await smtp.waitFor(2);
      const [old] = smtp.to('user00002@example.org').filter((m) => m.subject === SUBJECT);
      const [fresh] = smtp.to('moved@elsewhere.example').filter((m) => m.subject === SUBJECT);
      assert.ok(old, 'the old address is told');
      assert.ok(fresh, 'the new address is told');
      assert.match(old.text, /By: your organization’s user directory/);
      await syncLdapDirectory(ctx.store, ctx.keys, directoryId);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(
        smtp.messages.filter((m) => m.subject === SUBJECT).length,
        2,
        'a sync that changes nothing tells nothing',
      );
    });
  });
}
