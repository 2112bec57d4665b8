// Writing one queued message (src/events/mail.ts, sendMail): the user, the organization and the
// link read together, and each reason a message is given up instead of sent somewhere stale.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  migratedDatabase,
  PUBLIC_URL,
  seedOrg,
  seedUser,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { createRecoveryLink } from '../../src/webauthn/recovery-links.ts';
import { sealLink, type LinkMailData } from '../../src/webauthn/mail-links.ts';
import { createMailer, mailContexts, sendMail, type MailDeps } from '../../src/events/mail.ts';
import { disableUser } from '../../src/oauth/account-lifecycle.ts';
import { startSmtp, type TestSmtp } from './smtp.ts';

const keys = keyring(TEST_SECRET);

for (const dialect of dialects()) {
  describe(`sendMail (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    let smtp: TestSmtp;
    let deps: MailDeps;

    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      smtp = await startSmtp();
      await seedOrg({ store }, 1, 'example.org', 'Example University');
      for (const name of ['ada', 'bob', 'dan'])
        await seedUser({ store }, 1, `${name}@example.org`, { email: `${name}@mail.example` });
      await seedUser({ store }, 1, 'cy@example.org');
      deps = {
        store,
        keys,
        publicUrl: PUBLIC_URL,
        brand: {},
        mailer: createMailer({ smtpUrl: smtp.url, smtpFrom: 'idp@example.test' }),
      };
    });

    after(async () => {
      deps.mailer?.close();
      await smtp.stop();
      await store.close();
      await db.drop();
    });

    /** an invitation's data for a new link of `owner`, as queued for `eppn` */
    async function invitation(
      owner: string,
      eppn = owner,
      ttlMs?: number,
    ): Promise<{ data: LinkMailData; id: number }> {
      const link = await createRecoveryLink(store, PUBLIC_URL, { eppn: owner, purpose: 'invitation', ttlMs });
      const token = new URL(link.url).pathname.split('/').pop()!;
      const data = { eppn, org_id: 1, link_id: link.id, link: sealLink(keys, eppn, link.id, token), expires_at: 0 };
      return { data, id: link.id };
    }

    it('writes and sends an invitation with its link, to the address the user has now', async () => {
      const { data } = await invitation('ada@example.org');
      assert.deepEqual(await sendMail(deps, 'invitation', JSON.stringify(data)), { ok: true });
      const [message] = await smtp.waitFor(1);
      assert.equal(message!.to, 'ada@mail.example');
      assert.match(message!.text, new RegExp(`${PUBLIC_URL}/recover/`));
      assert.match(message!.subject, /Example University/);
    });

    it('sends a notification, which carries no link', async () => {
      const data = { eppn: 'bob@example.org', org_id: 1, notice: 'passkey_added', by: 'you', at: Date.now() };
      const before = smtp.messages.length;
      assert.deepEqual(await sendMail(deps, 'notification', JSON.stringify(data)), { ok: true });
      await smtp.waitFor(before + 1);
      assert.equal(smtp.messages.at(-1)!.to, 'bob@mail.example');
    });

    it('gives up a message whose link was used, revoked, is another user’s, expired, or is not named', async () => {
      const gone = async (data: object) => sendMail(deps, 'invitation', JSON.stringify(data));
      const used = await invitation('bob@example.org');
      await store.db.updateTable('recovery_links').set({ used_at: Date.now() }).where('id', '=', used.id).execute();
      assert.deepEqual(await gone(used.data), { gone: 'the link was used or revoked' });
      const revoked = await invitation('bob@example.org');
      await store.db
        .updateTable('recovery_links')
        .set({ revoked_at: Date.now() })
        .where('id', '=', revoked.id)
        .execute();
      assert.deepEqual(await gone(revoked.data), { gone: 'the link was used or revoked' });
      // bob's link in a message for ada
      const others = await invitation('bob@example.org', 'ada@example.org');
      assert.deepEqual(await gone(others.data), { gone: 'the link was used or revoked' });
      const expired = await invitation('bob@example.org');
      await store.db
        .updateTable('recovery_links')
        .set({ expires_at: Date.now() - 1 })
        .where('id', '=', expired.id)
        .execute();
      assert.deepEqual(await gone(expired.data), { gone: 'the link expired before it could be sent' });
      const { link_id: _, ...unnamed } = (await invitation('bob@example.org')).data;
      assert.deepEqual(await gone(unnamed), { gone: 'the link was used or revoked' });
      assert.deepEqual(await gone({ ...used.data, link_id: 'x' }), { gone: 'the link was used or revoked' });
      assert.deepEqual(await gone({ ...used.data, link_id: 987654 }), { gone: 'the link was used or revoked' });
    });

    it('gives up a message for a user who is gone, disabled or has no address', async () => {
      assert.deepEqual(
        await sendMail(deps, 'notification', JSON.stringify({ eppn: 'nobody@example.org', notice: 'passkey_added' })),
        { gone: 'the user no longer exists' },
      );
      assert.deepEqual(
        await sendMail(deps, 'notification', JSON.stringify({ eppn: 'cy@example.org', notice: 'passkey_added' })),
        { gone: 'the user has no e-mail address' },
      );
      const { data } = await invitation('dan@example.org');
      await disableUser(store, 'dan@example.org');
      assert.deepEqual(await sendMail(deps, 'invitation', JSON.stringify(data)), { gone: 'the user is disabled' });
    });

    it('writes a batch from contexts read together, with the outcomes of one message at a time', async () => {
      const used = await invitation('bob@example.org');
      await store.db.updateTable('recovery_links').set({ used_at: Date.now() }).where('id', '=', used.id).execute();
      const messages = [
        { kind: 'invitation', data: (await invitation('ada@example.org')).data },
        { kind: 'invitation', data: (await invitation('bob@example.org', 'ada@example.org')).data },
        { kind: 'invitation', data: used.data },
        { kind: 'reminder', data: (await invitation('bob@example.org')).data },
        { kind: 'notification', data: { eppn: 'bob@example.org', notice: 'passkey_removed', by: 'you', at: 1 } },
        { kind: 'notification', data: { eppn: 'cy@example.org', notice: 'passkey_added' } },
        { kind: 'notification', data: { eppn: 'nobody@example.org', notice: 'passkey_added' } },
        { kind: 'invitation', data: { notice: 'no user named' } },
      ].map(({ kind, data }) => ({ kind, data: JSON.stringify(data) }));
      const contexts = await mailContexts(deps, [...messages, { kind: 'notification', data: 'not JSON' }]);
      // ada's, bob's and cy's users; bob's link in ada's message is still read, and refused when written
      assert.equal(contexts.size, 6);
      const together = [];
      for (const m of messages) together.push(await sendMail(deps, m.kind, m.data, contexts));
      const alone = [];
      for (const m of messages) alone.push(await sendMail(deps, m.kind, m.data));
      assert.deepEqual(together, alone);
      assert.deepEqual(together, [
        { ok: true },
        { gone: 'the link was used or revoked' },
        { gone: 'the link was used or revoked' },
        { ok: true },
        { ok: true },
        { gone: 'the user has no e-mail address' },
        { gone: 'the user no longer exists' },
        { gone: 'a message without its user' },
      ]);
    });
  });
}
