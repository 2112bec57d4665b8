// DPoP (RFC 9449) over real HTTP with openid-client holding the key: bound tokens from the token
// endpoint, and their use at userinfo, the passkey API and the user-existence API. Bad proofs are
// built by hand with jose; each is refused with the standard error and nothing is answered.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import * as oidc from 'openid-client';
import { calculateJwkThumbprint, decodeJwt, exportJWK, SignJWT, type JWK } from 'jose';
import { grantOrganizations } from '../../src/clients/index.ts';
import { recordProof } from '../../src/store/dpop-proofs.ts';
import { sweepExpired } from '../../src/store/housekeeping.ts';
import { dialects, seedClient, seedOrg, seedUser, basicAuth } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
const insecure = { execute: [oidc.allowInsecureRequests] };

interface Key {
  pair: CryptoKeyPair;
  jwk: JWK;
  jkt: string;
}

async function newKey(): Promise<Key> {
  const pair = await oidc.randomDPoPKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  return { pair, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

const ath = (token: string) => createHash('sha256').update(token).digest('base64url');

/** A DPoP proof as a client builds one; `claims` overrides or removes (undefined) a claim. */
function proof(key: Key, claims: Record<string, unknown>, signer: Key = key): Promise<string> {
  const payload = Object.fromEntries(
    Object.entries({ jti: randomUUID(), iat: Math.floor(Date.now() / 1000), ...claims }).filter(
      ([, v]) => v !== undefined,
    ),
  );
  return new SignJWT(payload)
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk })
    .sign(signer.pair.privateKey);
}

for (const dialect of dialects()) {
  describe(`DPoP-bound tokens (${dialect})`, () => {
    let server: E2EServer;
    let api: oidc.Configuration;
    let apiClient: { clientId: string; secret: string };
    let checker: oidc.Configuration;
    let rp: oidc.Configuration;
    let publicRp: oidc.Configuration;
    let publicClientId: string;
    let sub: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      sub = (await seedUser(server, 1, 'ada@example.org')).sub;
      apiClient = await seedClient(server, { scopes: ['passkey.read'], orgs: [1] });
      const check = await seedClient(server, { scopes: ['system-check-user-existence'] });
      await grantOrganizations(server.store, check.clientId, [1], 'checkuser');
      const signIn = await seedClient(server, { redirectUris: [REDIRECT], scopes: ['offline_access'] });
      const pub = await seedClient(server, { redirectUris: [REDIRECT], scopes: ['offline_access'], public: true });
      publicClientId = pub.clientId;
      const discover = (id: string, auth: oidc.ClientAuth) =>
        oidc.discovery(new URL(server.url), id, undefined, auth, insecure);
      api = await discover(apiClient.clientId, oidc.ClientSecretBasic(apiClient.secret));
      checker = await discover(check.clientId, oidc.ClientSecretBasic(check.secret));
      rp = await discover(signIn.clientId, oidc.ClientSecretBasic(signIn.secret));
      publicRp = await discover(pub.clientId, oidc.None());
    });
    after(() => server?.close());

    const passkeys = () => new URL(`${server.url}/2/passkey/1`);

    /** A code as the authorization endpoint stores it after sign-in and consent. */
    async function mintCode(clientId: string, scope: string, verifier: string): Promise<string> {
      const provider = server.provider.current();
      const grant = new provider.Grant({ accountId: sub, clientId });
      grant.addOIDCScope(scope);
      const grantId = await grant.save();
      const client = await provider.Client.find(clientId);
      return new provider.AuthorizationCode({
        accountId: sub,
        client: client!,
        grantId,
        scope,
        redirectUri: REDIRECT,
        authTime: Math.floor(Date.now() / 1000),
        gty: 'authorization_code',
        codeChallenge: await oidc.calculatePKCECodeChallenge(verifier),
        codeChallengeMethod: 'S256',
      }).save();
    }

    async function signIn(config: oidc.Configuration, clientId: string, key: Key, scope = 'openid') {
      const verifier = oidc.randomPKCECodeVerifier();
      const code = await mintCode(clientId, scope, verifier);
      return oidc.genericGrantRequest(
        config,
        'authorization_code',
        { code, redirect_uri: REDIRECT, code_verifier: verifier },
        { DPoP: oidc.getDPoPHandle(config, key.pair) },
      );
    }

    /** A current nonce, as the server hands it out to a proof without one. */
    async function nonce(): Promise<string> {
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basicAuth(apiClient.clientId, apiClient.secret),
          dpop: await proof(await newKey(), { htm: 'POST', htu: `${server.url}/oauth/token` }),
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'passkey.read' }),
      });
      await res.body?.cancel();
      return res.headers.get('dpop-nonce')!;
    }

    it('the token endpoint issues a nonce and asks for it (use_dpop_nonce)', async () => {
      const key = await newKey();
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basicAuth(apiClient.clientId, apiClient.secret),
          dpop: await proof(key, { htm: 'POST', htu: `${server.url}/oauth/token` }),
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'passkey.read' }),
      });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: string }).error, 'use_dpop_nonce');
      assert.match(res.headers.get('dpop-nonce') ?? '', /^[A-Za-z0-9_-]{43}$/);
    });

    it('discovery lists the accepted proof algorithms', () => {
      const algs = api.serverMetadata().dpop_signing_alg_values_supported;
      assert.ok(algs?.includes('ES256'));
      assert.ok(!algs?.some((a) => a.startsWith('HS') || a === 'none'));
    });

    it('client_credentials with DPoP: a DPoP token with cnf.jkt, accepted by the passkey API with proofs', async () => {
      const key = await newKey();
      const DPoP = oidc.getDPoPHandle(api, key.pair);
      const tokens = await oidc.clientCredentialsGrant(api, { scope: 'passkey.read' }, { DPoP });
      assert.equal(tokens.token_type, 'dpop');
      assert.deepEqual(decodeJwt(tokens.access_token).cnf, { jkt: key.jkt });

      const res = await oidc.fetchProtectedResource(api, tokens.access_token, passkeys(), 'GET', undefined, undefined, {
        DPoP,
      });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), []);
      // the next request proves again, with a new proof
      const again = await oidc.fetchProtectedResource(
        api,
        tokens.access_token,
        passkeys(),
        'GET',
        undefined,
        undefined,
        {
          DPoP,
        },
      );
      assert.equal(again.status, 200);
    });

    it('the user-existence API takes DPoP-bound tokens too', async () => {
      const DPoP = oidc.getDPoPHandle(checker, (await newKey()).pair);
      const tokens = await oidc.clientCredentialsGrant(checker, { scope: 'system-check-user-existence' }, { DPoP });
      const url = new URL(`${server.url}/userinfo/v1/exists/idp%3Aada%40example.org`);
      const res = await oidc.fetchProtectedResource(checker, tokens.access_token, url, 'GET', undefined, undefined, {
        DPoP,
      });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { exists: true });
    });

    it('a bound token presented as a bearer token is refused; a plain bearer token works as before', async () => {
      const DPoP = oidc.getDPoPHandle(api, (await newKey()).pair);
      const bound = await oidc.clientCredentialsGrant(api, { scope: 'passkey.read' }, { DPoP });
      const asBearer = await fetch(passkeys(), { headers: { authorization: `Bearer ${bound.access_token}` } });
      assert.equal(asBearer.status, 401);
      assert.match(asBearer.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/);

      const plain = await oidc.clientCredentialsGrant(api, { scope: 'passkey.read' });
      assert.equal(plain.token_type, 'bearer');
      assert.equal(decodeJwt(plain.access_token).cnf, undefined);
      const ok = await fetch(passkeys(), { headers: { authorization: `Bearer ${plain.access_token}` } });
      assert.equal(ok.status, 200);
      // and an unbound token cannot be passed off under the DPoP scheme
      const key = await newKey();
      const asDpop = await fetch(passkeys(), {
        headers: {
          authorization: `DPoP ${plain.access_token}`,
          dpop: await proof(key, {
            htm: 'GET',
            htu: passkeys().href,
            ath: ath(plain.access_token),
            nonce: await nonce(),
          }),
        },
      });
      assert.equal(asDpop.status, 401);
    });

    it('userinfo answers a DPoP-bound token with a proof, and refuses it as a bearer token', async () => {
      const key = await newKey();
      const tokens = await signIn(rp, rp.clientMetadata().client_id, key);
      assert.equal(tokens.token_type, 'dpop');
      const DPoP = oidc.getDPoPHandle(rp, key.pair);
      const info = await oidc.fetchUserInfo(rp, tokens.access_token, sub, { DPoP });
      assert.equal(info.sub, sub);

      const asBearer = await fetch(`${server.url}/openid/userinfo`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.equal(asBearer.status, 401);
      const otherKey = oidc.getDPoPHandle(rp, (await newKey()).pair);
      await assert.rejects(oidc.fetchUserInfo(rp, tokens.access_token, sub, { DPoP: otherKey }));
    });

    it('userinfo under the DPoP scheme without a proof is 401 with a DPoP challenge (RFC 9449 7.1), not 400', async () => {
      const key = await newKey();
      const bound = await signIn(rp, rp.clientMetadata().client_id, key);
      for (const method of ['GET', 'POST']) {
        const res = await fetch(`${server.url}/openid/userinfo`, {
          method,
          headers: { authorization: `DPoP ${bound.access_token}` },
        });
        const body = (await res.json()) as { error?: string };
        assert.equal(res.status, 401, `${method}: ${JSON.stringify(body)}`);
        assert.equal(body.error, 'invalid_dpop_proof');
        assert.match(
          res.headers.get('www-authenticate') ?? '',
          new RegExp(`^DPoP realm="${server.url}", error="invalid_dpop_proof"`),
        );
      }
      // with the proof the same token is answered (the refusal is only about the missing proof)
      const info = await oidc.fetchUserInfo(rp, bound.access_token, sub, { DPoP: oidc.getDPoPHandle(rp, key.pair) });
      assert.equal(info.sub, sub);
    });

    it("a public client's refresh token is bound to its DPoP key", async () => {
      const key = await newKey();
      const tokens = await signIn(publicRp, publicClientId, key, 'openid offline_access');
      assert.ok(tokens.refresh_token);
      const stolen = oidc.getDPoPHandle(publicRp, (await newKey()).pair);
      await assert.rejects(
        oidc.refreshTokenGrant(publicRp, tokens.refresh_token, undefined, { DPoP: stolen }),
        (err: { error?: string }) => err.error === 'invalid_grant',
      );
      await assert.rejects(
        oidc.refreshTokenGrant(publicRp, tokens.refresh_token),
        (err: { error?: string }) => err.error === 'invalid_grant',
      );
    });

    it('the same public client refreshes with its own key', async () => {
      const key = await newKey();
      const tokens = await signIn(publicRp, publicClientId, key, 'openid offline_access');
      const DPoP = oidc.getDPoPHandle(publicRp, key.pair);
      const refreshed = await oidc.refreshTokenGrant(publicRp, tokens.refresh_token!, undefined, { DPoP });
      assert.equal(refreshed.token_type, 'dpop');
      assert.ok(refreshed.refresh_token);
    });

    describe('bad proofs at the passkey API', () => {
      let key: Key;
      let token: string;

      before(async () => {
        key = await newKey();
        const tokens = await oidc.clientCredentialsGrant(
          api,
          { scope: 'passkey.read' },
          { DPoP: oidc.getDPoPHandle(api, key.pair) },
        );
        token = tokens.access_token;
      });

      const good = async () => ({
        htm: 'GET',
        htu: passkeys().href,
        ath: ath(token),
        nonce: await nonce(),
      });

      async function call(dpop: string | undefined, method = 'GET') {
        const res = await fetch(passkeys(), {
          method,
          headers: { authorization: `DPoP ${token}`, ...(dpop === undefined ? {} : { dpop }) },
        });
        return { status: res.status, headers: res.headers, body: await res.text() };
      }

      function assertRefused(answer: Awaited<ReturnType<typeof call>>, error: string) {
        assert.equal(answer.status, 401, answer.body);
        assert.match(answer.headers.get('www-authenticate') ?? '', new RegExp(`^DPoP .*error="${error}"`));
        assert.doesNotMatch(answer.body, /eppn/);
      }

      it('a good proof is answered', async () => {
        assert.equal((await call(await proof(key, await good()))).status, 200);
      });

      it('no proof', async () => assertRefused(await call(undefined), 'invalid_dpop_proof'));

      it('wrong htm', async () =>
        assertRefused(await call(await proof(key, { ...(await good()), htm: 'POST' })), 'invalid_dpop_proof'));

      it('wrong htu', async () =>
        assertRefused(
          await call(await proof(key, { ...(await good()), htu: `${server.url}/2/passkey/2` })),
          'invalid_dpop_proof',
        ));

      it('htu on another host', async () =>
        assertRefused(
          await call(await proof(key, { ...(await good()), htu: 'https://elsewhere.example/2/passkey/1' })),
          'invalid_dpop_proof',
        ));

      it('iat too old, and in the future', async () => {
        const now = Math.floor(Date.now() / 1000);
        assertRefused(await call(await proof(key, { ...(await good()), iat: now - 600 })), 'invalid_dpop_proof');
        assertRefused(await call(await proof(key, { ...(await good()), iat: now + 600 })), 'invalid_dpop_proof');
      });

      it('a replayed jti', async () => {
        const once = await proof(key, await good());
        assert.equal((await call(once)).status, 200);
        assertRefused(await call(once), 'invalid_dpop_proof');
      });

      it('concurrent use of one proof: exactly one is answered', async () => {
        const once = await proof(key, await good());
        const answers = await Promise.all(Array.from({ length: 10 }, () => call(once)));
        assert.equal(answers.filter((a) => a.status === 200).length, 1);
        assert.equal(answers.filter((a) => a.status === 401).length, 9);
      });

      it('the wrong key (not the one the token is bound to)', async () =>
        assertRefused(await call(await proof(await newKey(), await good())), 'invalid_dpop_proof'));

      it('a signature by another key than the embedded one', async () =>
        assertRefused(await call(await proof(key, await good(), await newKey())), 'invalid_dpop_proof'));

      it('missing or wrong ath', async () => {
        assertRefused(await call(await proof(key, { ...(await good()), ath: undefined })), 'invalid_dpop_proof');
        assertRefused(await call(await proof(key, { ...(await good()), ath: ath('another') })), 'invalid_dpop_proof');
      });

      it('missing or unknown nonce: use_dpop_nonce with a DPoP-Nonce to use', async () => {
        for (const bad of [undefined, 'not-a-nonce']) {
          const answer = await call(await proof(key, { ...(await good()), nonce: bad }));
          assertRefused(answer, 'use_dpop_nonce');
          const issued = answer.headers.get('dpop-nonce');
          assert.match(issued ?? '', /^[A-Za-z0-9_-]{43}$/);
          assert.equal((await call(await proof(key, { ...(await good()), nonce: issued }))).status, 200);
        }
      });

      it('a proof with another typ or alg none', async () => {
        const claims = { ...(await good()), jti: randomUUID(), iat: Math.floor(Date.now() / 1000) };
        const jwt = await new SignJWT(claims)
          .setProtectedHeader({ typ: 'JWT', alg: 'ES256', jwk: key.jwk })
          .sign(key.pair.privateKey);
        assertRefused(await call(jwt), 'invalid_dpop_proof');
        const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
        const unsigned = `${b64({ typ: 'dpop+jwt', alg: 'none', jwk: key.jwk })}.${b64(claims)}.`;
        assertRefused(await call(unsigned), 'invalid_dpop_proof');
      });
    });

    it('proof ids are kept until their window closes; housekeeping removes them', async () => {
      const now = Date.now();
      const id = `test:${randomUUID()}`;
      assert.equal(await recordProof(server.store.db, id, now + 1000, now), true);
      assert.equal(await recordProof(server.store.db, id, now + 1000, now), false);
      await sweepExpired(server.store, now + 2000);
      assert.equal(await recordProof(server.store.db, id, now + 3000, now + 2000), true);
      // an expired id that housekeeping has not reached yet is taken over as well
      assert.equal(await recordProof(server.store.db, id, now + 5000, now + 4000), true);
    });

    describe('bad proofs at the token endpoint: nothing is issued', () => {
      async function tokenWith(dpop: string) {
        const res = await fetch(`${server.url}/oauth/token`, {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: basicAuth(apiClient.clientId, apiClient.secret),
            dpop,
          },
          body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'passkey.read' }),
        });
        return { status: res.status, body: (await res.json()) as { error?: string; access_token?: string } };
      }
      const htu = () => `${server.url}/oauth/token`;

      it('wrong htm, wrong htu, old iat, a replayed jti, a bad signature', async () => {
        const key = await newKey();
        const n = await nonce();
        const good = { htm: 'POST', htu: htu(), nonce: n };
        const once = await proof(key, good);
        assert.ok((await tokenWith(once)).body.access_token);
        for (const bad of [
          await proof(key, { ...good, htm: 'GET' }),
          await proof(key, { ...good, htu: `${server.url}/oauth/par` }),
          once,
          await proof(key, good, await newKey()),
        ]) {
          const answer = await tokenWith(bad);
          assert.equal(answer.status, 400);
          assert.equal(answer.body.error, 'invalid_dpop_proof');
          assert.equal(answer.body.access_token, undefined);
        }
      });
    });
  });
}
