// The ACS holds a client posting Responses in a loop to the sign-in pages' challenge budget (ten
// times LOGIN_RATE_LIMIT_IP per 15 minutes): then 429 with Retry-After, before any XML is read.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';

for (const dialect of dialects()) {
  describe(`the SAML ACS rate limit (${dialect})`, () => {
    let server: E2EServer;
    before(async () => {
      server = await startServer(dialect, { LOGIN_RATE_LIMIT_IP: '1' });
    });
    after(async () => {
      await server?.close();
    });

    it('answers 429 after ten Responses from one address', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const response = await fetch(`${server.url}/saml2/sp/acs`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: 'SAMLResponse=PGEvPg%3D%3D',
        });
        statuses.push(response.status);
        if (response.status === 429) assert.ok(Number(response.headers.get('retry-after')) > 0);
        await response.body?.cancel();
      }
      assert.deepEqual(statuses, [...Array(10).fill(400), 429]);
    });
  });
}
