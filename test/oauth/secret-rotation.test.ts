import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../../src/app.ts';
import { hmac, keyring, open, seal } from '../../src/crypto.ts';
import { addLdapDirectory, directorySettings } from '../../src/directory/ldap-directories.ts';
import { targetPolicy } from '../../src/events/targets.ts';
import { addWebhook, signingKeys } from '../../src/events/webhooks.ts';
import { keyTiming } from '../../src/oauth/key-manager.ts';
import { ensureSigningKeys, loadKeySet } from '../../src/oauth/keys.ts';
import { loadKeyring } from '../../src/oauth/master-secret.ts';
import { addUpstreamProvider, oidcCredentials } from '../../src/upstream/providers.ts';
import { ensureSamlKeys, samlKeys } from '../../src/service-providers/saml-keys.ts';
import { openStore } from '../../src/store/index.ts';
import { findWebhook } from '../../src/store/events.ts';
import { findLdapDirectory } from '../../src/store/ldap.ts';
import {
  cli,
  clientToken,
  dialects,
  migratedDatabase,
  seedClient,
  seedOrg,
  testConfig,
  TEST_SECRET,
} from '../helpers.ts';

const NEW_SECRET = 'the-new-master-secret-0123456789-ABCDEFGHIJ';

for (const dialect of dialects()) {
  describe(`secret rotate (${dialect})`, () => {
    it('seals everything again under the new secret in one go; the old one is refused, the previous one accepted during the transition', async () => {
      const database = await migratedDatabase(dialect);
      const config = testConfig(database.url);
      const store = await openStore(config.databaseUrl);
      const dir = mkdtempSync(join(tmpdir(), 'idp-secret-'));
      try {
        const old = keyring(TEST_SECRET);
        await seedOrg({ store });
        await ensureSigningKeys(store, old);
        await ensureSamlKeys(store, old);
        const before = await loadKeySet(store, old, keyTiming(config));
        const samlBefore = await samlKeys(store, old);
        const client = await seedClient({ store, keys: old }, { scopes: ['passkey.read'] });
        const hook = await addWebhook(store, old, targetPolicy(config), {
          orgId: 1,
          url: 'https://hooks.example.test/h',
        });
        const ldap = await addLdapDirectory(store, old, {
          orgId: 1,
          url: 'ldaps://ldap.example.test',
          bindDn: 'cn=svc,dc=example,dc=test',
          bindPassword: 'bind-password-1',
          baseDn: 'dc=example,dc=test',
        });
        const upstream = await addUpstreamProvider(store, old, {
          orgId: 1,
          type: 'oidc',
          name: 'Old IdP',
          issuer: 'https://old-idp.example.test',
          clientId: 'idp',
          clientSecret: 'upstream-client-secret-1',
        });
        const jwtUpstream = await addUpstreamProvider(store, old, {
          orgId: 1,
          type: 'oidc',
          name: 'Key IdP',
          issuer: 'https://key-idp.example.test',
          clientId: 'idp',
          authMethod: 'private_key_jwt',
        });
        const jwkBefore = (await oidcCredentials(store, old, jwtUpstream.id)).privateJwk;
        assert.ok(jwkBefore);
        const pairwiseBefore = hmac(old.samlPairwise, 'user@example.org');

        // A value that opens under no secret makes the rotation change nothing.
        const bad = await addWebhook(store, old, targetPolicy(config), {
          orgId: 1,
          url: 'https://hooks.example.test/x',
        });
        await store.db
          .updateTable('webhooks')
          .set({ secret: seal(Buffer.alloc(32), Buffer.from('x')) })
          .where('id', '=', bad.id)
          .execute();
        const refused = await cli(
          database.url,
          ['secret', 'rotate', '--stdin', '--out', join(dir, 'refused')],
          NEW_SECRET,
        );
        assert.equal(refused.code, 1, refused.out);
        assert.match(refused.err, /webhooks .* does not open under the current secret: nothing was changed/);
        assert.equal(existsSync(join(dir, 'refused')), false, 'the new secret is not left behind');
        await store.db.deleteFrom('webhooks').where('id', '=', bad.id).execute();
        assert.deepEqual(await loadKeySet(store, old, keyTiming(config)), before, 'still sealed under the old secret');

        const out = join(dir, 'new-secret');
        const rotated = await cli(database.url, ['secret', 'rotate', '--stdin', '--out', out, '--json'], NEW_SECRET);
        assert.equal(rotated.code, 0, rotated.err);
        const view = JSON.parse(rotated.out);
        assert.equal(view.secret_file, out);
        // 2 signing keys, 3 SAML keys, a webhook, a bind password, 2 upstream secrets, kept keys
        assert.ok(view.sealed_values >= 8, rotated.out);
        assert.equal(view.kept_keys_added, 2);
        assert.equal(readFileSync(out, 'utf8').trim(), NEW_SECRET);
        assert.equal(statSync(out).mode & 0o777, 0o600);

        // The old secret is refused by the admin commands (and the service: the same check).
        const stale = await cli(database.url, ['keys', 'rotate']);
        assert.equal(stale.code, 1);
        assert.match(stale.err, /IDP_SECRET does not match/);
        assert.equal(
          open(
            old.keyEncryption,
            (await store.db.selectFrom('signing_keys').select('private_jwk').executeTakeFirstOrThrow()).private_jwk,
            '',
          ),
          undefined,
        );
        await assert.rejects(loadKeySet(store, old, keyTiming(config)), /cannot be decrypted/);

        // Under the new secret everything opens, and what was derived still holds.
        const fresh = await loadKeyring(store, { secret: NEW_SECRET });
        const after = await loadKeySet(store, fresh, keyTiming(config));
        assert.deepEqual(after.publicJwks, before.publicJwks);
        assert.deepEqual(after.active, before.active);
        const samlAfter = await samlKeys(store, fresh);
        assert.equal(samlAfter.signing.kid, samlBefore.signing.kid);
        assert.equal(
          samlAfter.signing.privateKey.export({ format: 'pem', type: 'pkcs8' }),
          samlBefore.signing.privateKey.export({ format: 'pem', type: 'pkcs8' }),
        );
        const row = (await findWebhook(store.db, hook.id))!;
        assert.deepEqual(signingKeys(fresh, row, Date.now()), [
          Buffer.from(hook.secret.slice('whsec_'.length), 'base64'),
        ]);
        assert.equal(
          directorySettings(fresh, (await findLdapDirectory(store.db, Number(ldap.id)))!).bindPassword,
          'bind-password-1',
        );
        assert.deepEqual(await oidcCredentials(store, fresh, upstream.id), {
          clientSecret: 'upstream-client-secret-1',
        });
        assert.deepEqual((await oidcCredentials(store, fresh, jwtUpstream.id)).privateJwk, jwkBefore);
        assert.deepEqual(
          await oidcCredentials(store, keyring(NEW_SECRET), upstream.id),
          {
            clientSecret: 'upstream-client-secret-1',
          },
          'sealed under the new secret itself, not only opened through the previous one',
        );
        assert.equal(hmac(fresh.samlPairwise, 'user@example.org'), pairwiseBefore, 'pairwise ids do not change');
        assert.notEqual(hmac(keyring(NEW_SECRET).samlPairwise, 'user@example.org'), pairwiseBefore);
        const built = await buildApp({
          config: testConfig(database.url, { IDP_SECRET: NEW_SECRET }),
          store,
          keys: fresh,
        });
        try {
          await built.app.ready();
          // the client's secret, hashed under the old secret's key, still authenticates it
          assert.ok(await clientToken(built, client.clientId, client.secret, 'passkey.read'));
        } finally {
          await built.app.close();
        }

        // Audited, without the secret.
        const audit = await store.db
          .selectFrom('audit_events')
          .selectAll()
          .where('kind', '=', 'secret.rotate')
          .execute();
        assert.equal(audit.length, 1);
        assert.doesNotMatch(JSON.stringify(audit), new RegExp(NEW_SECRET));

        // The transition: an instance still on the old secret adds a webhook. The new instances,
        // given the old one as IDP_SECRET_PREVIOUS, open it; `secret reseal` seals it under the new one.
        const late = await addWebhook(store, old, targetPolicy(config), {
          orgId: 1,
          url: 'https://hooks.example.test/late',
        });
        const lateRow = (await findWebhook(store.db, late.id))!;
        assert.throws(() => signingKeys(fresh, lateRow, Date.now()), /cannot be opened/);
        const transition = await loadKeyring(store, { secret: NEW_SECRET, previous: TEST_SECRET });
        assert.equal(signingKeys(transition, lateRow, Date.now()).length, 1);
        const both = { IDP_SECRET: NEW_SECRET, IDP_SECRET_PREVIOUS: TEST_SECRET };
        const resealed = await cli(database.url, ['secret', 'reseal', '--json'], '', both);
        assert.equal(resealed.code, 0, resealed.err);
        assert.equal(JSON.parse(resealed.out).kept_keys_added, 0);
        const newOnly = await loadKeyring(store, { secret: NEW_SECRET });
        assert.equal(signingKeys(newOnly, (await findWebhook(store.db, late.id))!, Date.now()).length, 1);
        assert.equal((await cli(database.url, ['secret', 'reseal'], '', { IDP_SECRET: NEW_SECRET })).code, 1);

        // Cookies and CSRF tokens signed under the previous secret verify during the transition only.
        assert.deepEqual(transition.cookies.slice(1), old.cookies);
        assert.equal(transition.previousCsrf?.export().equals(old.csrf.export()), true);
        assert.equal(newOnly.previousCsrf, undefined);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await store.close();
        await database.drop();
      }
    });
  });
}

describe('secret rotate with the secret kept in DATA_DIR (sqlite)', () => {
  it('writes the new secret in place of the old, which moves to idp-secret.previous', async () => {
    const database = await migratedDatabase('sqlite');
    const dir = join(database.url, '..');

    try {
      const store = await openStore(database.url);
      const generated = 'generated-secret-0123456789-abcdefghijklmn';
      const { writeFileSync } = await import('node:fs');
      writeFileSync(join(dir, 'idp-secret'), `${generated}\n`, { mode: 0o600 });
      await ensureSigningKeys(store, keyring(generated));
      await store.close();
      const { runCli } = await import('../../src/cli/index.ts');
      const lines: string[] = [];
      const run = (args: string[]) =>
        runCli(
          args,
          { out: (l) => lines.push(l), err: (l) => lines.push(l), readStdin: async () => '' },
          {
            DATABASE_URL: database.url,
            DATA_DIR: dir,
            PUBLIC_URL: 'https://idp.example.test',
            LOG_LEVEL: 'silent',
          },
        );
      assert.equal(await run(['secret', 'rotate']), 0, lines.join('\n'));
      assert.match(lines.join('\n'), new RegExp(`The new secret is in ${join(dir, 'idp-secret')}\\.`));
      const next = readFileSync(join(dir, 'idp-secret'), 'utf8').trim();
      assert.notEqual(next, generated);
      assert.ok(next.length >= 32);
      assert.equal(readFileSync(join(dir, 'idp-secret.previous'), 'utf8').trim(), generated);
      assert.equal(existsSync(join(dir, 'idp-secret.next')), false);
      assert.equal(await run(['secret', 'reseal']), 0, lines.join('\n'));
      rmSync(join(dir, 'idp-secret.previous'));
      assert.equal(await run(['keys', 'rotate']), 0, lines.join('\n'));
    } finally {
      await database.drop();
    }
  });
});
