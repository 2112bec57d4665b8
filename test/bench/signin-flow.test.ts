// The sign-in benchmark's flow (bench/signin-flow.ts) against the real pages over real HTTP, so the
// benchmark cannot drift from them: passkeys registered through recovery links, then complete
// sign-ins with a passkey and with a password, on each database.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, pickFreePort, startTestApp, type TestContext } from '../helpers.ts';
import {
  FlowError,
  registerPasskey,
  seedSignIns,
  signIn,
  STEPS,
  type RelyingParty,
  type Target,
  type VirtualUser,
} from '../../bench/signin-flow.ts';

for (const dialect of dialects()) {
  describe(`the sign-in benchmark's flow (${dialect})`, () => {
    let ctx: TestContext;
    let target: Target;
    let rp: RelyingParty;
    let users: VirtualUser[];
    let links: string[];

    before(async () => {
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url }, { listen: port });
      target = { url, publicUrl: url };
      const seeded = await seedSignIns(ctx.store, ctx.keys, url, 2);
      rp = seeded.rp;
      users = seeded.users.map((s) => s.user);
      links = seeded.users.map((s) => s.recoveryUrl);
      for (const { user, recoveryUrl } of seeded.users) await registerPasskey(target, user, recoveryUrl);
    });
    after(() => ctx?.close());

    it('registration through the recovery link gave each user one passkey, and used the link up', async () => {
      const rows = await ctx.store.db.selectFrom('passkeys').select(['credential_id']).execute();
      assert.deepEqual(
        rows.map((r) => Buffer.from(r.credential_id).toString('hex')).sort(),
        users.map((u) => u.credential.id.toString('hex')).sort(),
      );
      for (const link of links) assert.equal((await fetch(link)).status, 404);
    });

    for (const mode of ['passkey', 'password'] as const) {
      it(`signs in with a ${mode} twice in a row, timing every step, and userinfo names the user`, async () => {
        for (const user of users) {
          for (let round = 0; round < 2; round++) {
            const { times, claims } = await signIn(target, rp, user, mode);
            assert.equal(claims.sub, user.sub);
            assert.equal(
              (claims as { email?: string }).email,
              user.eppn.replace('@signin.example.org', '@example.org'),
            );
            const expected = STEPS.filter((s) => mode === 'passkey' || s !== 'options');
            assert.deepEqual(Object.keys(times).sort(), [...expected].sort());
            assert.deepEqual(user.jar.names().filter((n) => n.endsWith('idp_browser')).length, 1);
          }
        }
      });
    }

    it('a wrong password or a passkey the service does not know stops the flow at the sign-in step', async () => {
      const user = users[0]!;
      await assert.rejects(signIn(target, rp, { ...user, password: 'not the password' }, 'password'), (err) => {
        assert.ok(err instanceof FlowError);
        assert.match(err.message, /^password sign-in: 401/);
        return true;
      });
      const stranger = { ...user, credential: { ...user.credential, id: Buffer.alloc(32, 7) } };
      await assert.rejects(signIn(target, rp, stranger, 'passkey'), /^FlowError: passkey sign-in: 401/);
    });
  });
}
