import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, cli, seedClient, clientToken } from '../helpers.ts';
import { listGrantedOrganizations } from '../../src/store/clients.ts';
import { checkuserWorld, get, type CheckuserWorld } from './fixtures.ts';

const ALICE = `/userinfo/v1/exists/${encodeURIComponent('idp:alice@example.org')}`;
const BOB = '/check_single/bob%40other.org';

for (const dialect of dialects()) {
  describe(`client grant-checkuser / revoke-checkuser (${dialect})`, () => {
    let w: CheckuserWorld;
    let client: { clientId: string; secret: string };
    let current: string;
    let legacy: string;
    const run = (args: string[]) => cli(w.ctx.config.databaseUrl, args);
    const granted = () => listGrantedOrganizations(w.ctx.store.db, client.clientId, 'checkuser');
    const adminGranted = () => listGrantedOrganizations(w.ctx.store.db, client.clientId, 'admin');

    before(async () => {
      w = await checkuserWorld(dialect);
      client = await seedClient(w.ctx, {
        name: 'Newcomer',
        scopes: ['system-check-user-existence', 'gk_checkuser', 'gk_checkuser_systemlookup'],
        orgs: [3],
      });
      current = await clientToken(w.ctx, client.clientId, client.secret, 'system-check-user-existence');
      legacy = await clientToken(w.ctx, client.clientId, client.secret, 'gk_checkuser gk_checkuser_systemlookup');
    });
    after(() => w.ctx.close());

    it('a client starts with no user-existence access', async () => {
      assert.equal((await get(w.ctx, ALICE, current)).statusCode, 403);
      assert.deepEqual(await granted(), []);
    });

    it('grants organizations, and lookups in them start working at once', async () => {
      const r = await run(['client', 'grant-checkuser', client.clientId, '--orgs', '1,2', '--json']);
      assert.equal(r.code, 0, r.err);
      assert.equal(r.err, '');
      const view = JSON.parse(r.out);
      assert.deepEqual(view.checkuser_organizations, [1, 2]);
      assert.deepEqual(view.organizations, [3], 'passkey API grants are separate');
      assert.deepEqual(await granted(), [1, 2]);
      assert.deepEqual(await adminGranted(), [3]);
      const res = await get(w.ctx, ALICE, current);
      assert.deepEqual([res.statusCode, res.json()], [200, { exists: true }]);
      assert.deepEqual((await get(w.ctx, BOB, legacy)).json(), { exists: true });
    });

    it('granting again is harmless', async () => {
      const r = await run(['client', 'grant-checkuser', client.clientId, '--orgs', '2']);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, /checkuser_organizations\s+1 2/);
      assert.deepEqual(await granted(), [1, 2]);
    });

    it('revokes an organization, and lookups in it are refused at once', async () => {
      const r = await run(['client', 'revoke-checkuser', client.clientId, '--orgs', '2']);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(await granted(), [1]);
      const res = await get(w.ctx, BOB, legacy);
      assert.deepEqual(
        [res.statusCode, res.json()],
        [403, { code: 403, message: 'Client not authorized for organization' }],
      );
      assert.equal((await get(w.ctx, ALICE, current)).statusCode, 200);
      assert.deepEqual(await adminGranted(), [3]);
    });

    const refusals: [string, () => string[], RegExp][] = [
      [
        'an unknown client (grant)',
        () => ['client', 'grant-checkuser', 'no-such-client', '--orgs', '2'],
        /^error: client 'no-such-client' does not exist$/,
      ],
      [
        'an unknown client (revoke)',
        () => ['client', 'revoke-checkuser', 'no-such-client', '--orgs', '1'],
        /^error: client 'no-such-client' does not exist$/,
      ],
      [
        'an unknown organization among known ones (grant)',
        () => ['client', 'grant-checkuser', client.clientId, '--orgs', '2,99'],
        /^error: organization 99 does not exist$/,
      ],
      [
        'an unknown organization (revoke)',
        () => ['client', 'revoke-checkuser', client.clientId, '--orgs', '1,99'],
        /^error: organization 99 does not exist$/,
      ],
      [
        'a non-numeric organization',
        () => ['client', 'grant-checkuser', client.clientId, '--orgs', '2,abc'],
        /^error: --orgs must be a positive integer \(at most 15 digits\)$/,
      ],
      [
        'organization 0',
        () => ['client', 'grant-checkuser', client.clientId, '--orgs', '0'],
        /^error: --orgs must be a positive integer/,
      ],
      [
        'an empty organization list',
        () => ['client', 'grant-checkuser', client.clientId, '--orgs', ','],
        /^error: --orgs needs at least one organization id$/,
      ],
      ['a missing --orgs', () => ['client', 'grant-checkuser', client.clientId], /^error: --orgs is required$/],
      [
        'a missing --orgs value',
        () => ['client', 'revoke-checkuser', client.clientId, '--orgs'],
        /^error: option '--orgs' needs a value <id,\.\.\.> \(usage: npm run idp -- client revoke-checkuser /,
      ],
      ['a missing client id', () => ['client', 'grant-checkuser', '--orgs', '2'], /^error: client id is required$/],
      [
        'an unknown option',
        () => ['client', 'grant-checkuser', client.clientId, '--orgs', '2', '--realm', 'x'],
        /^error: unknown option '--realm' \(usage: npm run idp -- client grant-checkuser <client_id> --orgs <id,\.\.\.>;/,
      ],
    ];
    for (const [name, args, message] of refusals) {
      it(`refuses ${name}: one line on stderr, non-zero exit, nothing changed`, async () => {
        const before = await granted();
        const r = await run(args());
        assert.notEqual(r.code, 0);
        assert.equal(r.out, '');
        assert.equal(r.err.split('\n').length, 1, r.err);
        assert.match(r.err, message);
        assert.deepEqual(await granted(), before);
      });
    }

    it('lists both commands in the usage', async () => {
      const r = await run(['help']);
      assert.match(r.out, /client grant-checkuser <client_id> --orgs <id,\.\.\.>/);
      assert.match(r.out, /client revoke-checkuser <client_id> --orgs <id,\.\.\.>/);
    });
  });
}
