// Starting upstream sign-ins counts against the per-address limit of the password form: past it,
// the organization's page says so with Retry-After, and nothing is sent upstream.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedOrg } from '../helpers.ts';
import { startRelyingParty, startServer, type E2EServer, type RelyingParty } from '../e2e/helpers.ts';
import { addUpstreamProvider } from '../../src/upstream/providers.ts';
import { fetchBrowser } from './oidc-upstream.ts';

for (const dialect of dialects()) {
  describe(`upstream sign-in rate limit (${dialect})`, () => {
    let server: E2EServer;
    let rp: RelyingParty;
    let id: string;
    before(async () => {
      server = await startServer(dialect, { LOGIN_RATE_LIMIT_IP: '2', UPSTREAM_TIMEOUT_MS: '500' });
      await seedOrg(server);
      // an upstream that is not there: each start that is let through ends on "could not be reached"
      id = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 1,
          type: 'oidc',
          name: 'Nowhere IdP',
          issuer: 'http://127.0.0.1:9',
          clientId: 'c',
          clientSecret: 's',
        })
      ).id;
      rp = await startRelyingParty(server, { firstParty: true });
    });
    after(async () => {
      await rp?.close();
      await server?.close();
    });

    it('refuses starts over the limit with 429 and Retry-After', async () => {
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 3; i++) {
        const browser = fetchBrowser();
        const end = await browser.walk((await rp.begin({ upstream: id })).url);
        statuses.push(end.status);
        last = end.res;
      }
      assert.deepEqual(statuses, [502, 502, 429]);
      assert.ok(Number(last?.headers.get('retry-after')) > 0);
    });
  });
}
