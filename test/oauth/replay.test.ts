// One-time artifacts of the token endpoint under concurrency, over real HTTP: an authorization code
// or a rotating refresh token presented by many requests at once is honoured at most once, every
// other request gets invalid_grant, and the replay revokes the grant (tokens issued by the winning
// request included), as RFC 6749 4.1.2 asks.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { dialects, seedOrg, seedUser, seedClient, basicAuth } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
const PARALLEL = 20;
const ROUNDS = 50;

interface Answer {
  status: number;
  body: { access_token?: string; refresh_token?: string; error?: string };
}

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

for (const dialect of dialects()) {
  describe(`one-time codes and rotating refresh tokens under concurrent use (${dialect})`, () => {
    let server: E2EServer;
    let sub: string;
    let confidential: { clientId: string; secret: string };
    let publicClient: { clientId: string };

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      sub = (await seedUser(server, 1, 'ada@example.org')).sub;
      confidential = await seedClient(server, { redirectUris: [REDIRECT], scopes: ['offline_access'] });
      publicClient = await seedClient(server, { redirectUris: [REDIRECT], scopes: ['offline_access'], public: true });
    });
    after(() => server?.close());

    /** A code exactly as the authorization endpoint stores it after sign-in and consent. */
    async function mintCode(clientId: string, scope: string, codeChallenge?: string): Promise<string> {
      const provider = server.provider.current();
      const grant = new provider.Grant({ accountId: sub, clientId });
      grant.addOIDCScope(scope);
      const grantId = await grant.save();
      const client = await provider.Client.find(clientId);
      const code = new provider.AuthorizationCode({
        accountId: sub,
        client: client!,
        grantId,
        scope,
        redirectUri: REDIRECT,
        authTime: Math.floor(Date.now() / 1000),
        gty: 'authorization_code',
        ...(codeChallenge ? { codeChallenge, codeChallengeMethod: 'S256' } : {}),
      });
      return code.save();
    }

    async function token(form: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form),
      });
      return { status: res.status, body: (await res.json()) as Answer['body'] };
    }

    const redeemConfidential = (code: string) =>
      token(
        { grant_type: 'authorization_code', code, redirect_uri: REDIRECT },
        { authorization: basicAuth(confidential.clientId, confidential.secret) },
      );

    const refreshPublic = (refreshToken: string) =>
      token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: publicClient.clientId });

    /** The public client's tokens after a sign-in with offline_access: a refresh token that rotates. */
    async function signInPublicClient(): Promise<Answer> {
      const { verifier, challenge } = pkce();
      const code = await mintCode(publicClient.clientId, 'openid offline_access', challenge);
      const issued = await token({
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        client_id: publicClient.clientId,
        code_verifier: verifier,
      });
      assert.equal(issued.status, 200, JSON.stringify(issued.body));
      return issued;
    }

    const refreshConfidential = (refreshToken: string) =>
      token(
        { grant_type: 'refresh_token', refresh_token: refreshToken },
        { authorization: basicAuth(confidential.clientId, confidential.secret) },
      );

    /** The confidential client's tokens after a sign-in with offline_access. */
    async function signInConfidentialClient(): Promise<Answer> {
      const issued = await redeemConfidential(await mintCode(confidential.clientId, 'openid offline_access'));
      assert.equal(issued.status, 200, JSON.stringify(issued.body));
      assert.ok(issued.body.refresh_token, 'offline_access gives a refresh token');
      return issued;
    }

    async function userinfoStatus(accessToken: string): Promise<number> {
      const res = await fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } });
      await res.arrayBuffer();
      return res.status;
    }

    /** At most one success; every other answer is 400 invalid_grant. Returns the success, if any. */
    function oneWinner(answers: Answer[], round: number): Answer | undefined {
      const wins = answers.filter((a) => a.status === 200);
      assert.ok(wins.length <= 1, `round ${round}: ${wins.length} of ${answers.length} requests succeeded`);
      for (const a of answers.filter((x) => x.status !== 200)) {
        assert.equal(a.status, 400, `round ${round}: ${JSON.stringify(a)}`);
        assert.equal(a.body.error, 'invalid_grant', `round ${round}: ${JSON.stringify(a)}`);
      }
      return wins[0];
    }

    it('a replayed code is refused and revokes the tokens its first redemption issued', async () => {
      const code = await mintCode(confidential.clientId, 'openid');
      const first = await redeemConfidential(code);
      assert.equal(first.status, 200);
      assert.equal(await userinfoStatus(first.body.access_token!), 200);
      const again = await redeemConfidential(code);
      assert.equal(again.status, 400);
      assert.equal(again.body.error, 'invalid_grant');
      assert.equal(await userinfoStatus(first.body.access_token!), 401);
    });

    it('a reused rotating refresh token is refused and revokes the grant', async () => {
      const issued = await signInPublicClient();
      const rotated = await refreshPublic(issued.body.refresh_token!);
      assert.equal(rotated.status, 200);
      assert.notEqual(rotated.body.refresh_token, issued.body.refresh_token, 'public clients rotate refresh tokens');
      const reused = await refreshPublic(issued.body.refresh_token!);
      assert.equal(reused.status, 400);
      assert.equal(reused.body.error, 'invalid_grant');
      assert.equal(
        (await refreshPublic(rotated.body.refresh_token!)).body.error,
        'invalid_grant',
        'the rotated token died with the grant',
      );
      assert.equal(await userinfoStatus(rotated.body.access_token!), 401);
    });

    it("a confidential client's refresh token rotates on every use, and reuse revokes the grant", async () => {
      const issued = await signInConfidentialClient();
      const rotated = await refreshConfidential(issued.body.refresh_token!);
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      assert.ok(rotated.body.refresh_token);
      assert.notEqual(rotated.body.refresh_token, issued.body.refresh_token, 'rotated on the first use');
      const reused = await refreshConfidential(issued.body.refresh_token!);
      assert.equal(reused.status, 400);
      assert.equal(reused.body.error, 'invalid_grant');
      assert.equal((await refreshConfidential(rotated.body.refresh_token!)).body.error, 'invalid_grant');
      assert.equal(await userinfoStatus(rotated.body.access_token!), 401);
    });

    it(`${PARALLEL} parallel redemptions of one code: at most one succeeds, ${ROUNDS} times`, async () => {
      let won = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const code = await mintCode(confidential.clientId, 'openid');
        const answers = await Promise.all(Array.from({ length: PARALLEL }, () => redeemConfidential(code)));
        const winner = oneWinner(answers, round);
        if (!winner) continue;
        won++;
        // the others were replays: the winner's access token went with the grant
        assert.equal(
          await userinfoStatus(winner.body.access_token!),
          401,
          `round ${round}: the first redemption's token survived a replay`,
        );
      }
      assert.ok(won > 0, 'some round had a winner');
    });

    it(`${PARALLEL} parallel uses of one rotating refresh token: at most one succeeds, ${ROUNDS} times`, async () => {
      let won = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const issued = await signInPublicClient();
        const answers = await Promise.all(
          Array.from({ length: PARALLEL }, () => refreshPublic(issued.body.refresh_token!)),
        );
        const winner = oneWinner(answers, round);
        if (!winner) continue;
        won++;
        assert.equal(
          (await refreshPublic(winner.body.refresh_token!)).body.error,
          'invalid_grant',
          `round ${round}: the rotated token survived a replay`,
        );
        assert.equal(
          await userinfoStatus(winner.body.access_token!),
          401,
          `round ${round}: the winner's access token survived a replay`,
        );
      }
      assert.ok(won > 0, 'some round had a winner');
    });

    it(`${PARALLEL} parallel uses of a confidential client's refresh token: at most one succeeds, ${ROUNDS} times`, async () => {
      let won = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const issued = await signInConfidentialClient();
        const answers = await Promise.all(
          Array.from({ length: PARALLEL }, () => refreshConfidential(issued.body.refresh_token!)),
        );
        const winner = oneWinner(answers, round);
        if (!winner) continue;
        won++;
        assert.notEqual(winner.body.refresh_token, issued.body.refresh_token, `round ${round}: not rotated`);
        assert.equal(
          (await refreshConfidential(winner.body.refresh_token!)).body.error,
          'invalid_grant',
          `round ${round}: the rotated token survived a replay`,
        );
        assert.equal(
          await userinfoStatus(winner.body.access_token!),
          401,
          `round ${round}: the winner's access token survived a replay`,
        );
      }
      assert.ok(won > 0, 'some round had a winner');
    });
  });
}
