// The peer: a stock oidc-provider (its default in-memory adapter, no customisation beyond what
// the comparison needs), issuing client_credentials access tokens in the same format as the
// service: an ES256-signed JWT for a resource server named by the default resource. Run as its own
// process; prints its port on stdout.
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

import { PEER_CLIENT } from './peer-client.ts';

const CLIENT = { client_id: PEER_CLIENT.id, client_secret: PEER_CLIENT.secret };
const RESOURCE = 'https://peer.example/api';
const port = Number(process.argv[2] ?? 0);

const { privateKey } = await generateKeyPair('ES256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), alg: 'ES256', use: 'sig', kid: 'peer-es256' };
const issuer = `http://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [
    {
      ...CLIENT,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'ES256',
      scope: 'passkey.read passkey.delete',
    },
  ],
  jwks: { keys: [jwk] },
  ttl: { ClientCredentials: 300 },
  scopes: ['passkey.read', 'passkey.delete'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'passkey.read passkey.delete',
        audience: RESOURCE,
        accessTokenTTL: 300,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256', kid: 'peer-es256' } },
      }),
    },
  },
  routes: { token: '/oauth/token' },
});
const server = provider.listen(port, '127.0.0.1');
server.once('listening', () => {
  process.stdout.write(`${(server.address() as { port: number }).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
