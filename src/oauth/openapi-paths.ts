// Documentation-only OpenAPI path entries for the endpoints oidc-provider serves behind the mounts
// of plugin.ts. Nothing here is a route: the provider keeps answering these paths; the entries
// describe them in the service's OpenAPI document (src/http/openapi.ts merges them in).
import { ROUTES } from './provider.ts';

type Json = Record<string, unknown>;

const FORM = 'application/x-www-form-urlencoded';
const OAUTH_ERROR = { $ref: '#/components/schemas/OAuthError' };
const PUBLIC = { security: [] };
/** Confidential clients authenticate with HTTP Basic (client_secret_basic) or with client_id and
 * client_secret in the body (client_secret_post); public clients send only client_id. */
const CLIENT_AUTH = { security: [{ clientBasic: [] }, {}] };

function oauthError(description: string, error: string, errorDescription: string): Json {
  return {
    description,
    content: { 'application/json': { schema: OAUTH_ERROR, example: { error, error_description: errorDescription } } },
  };
}

const badRequest = (example = 'invalid_request', text = "missing required parameter 'token'") =>
  oauthError('The request is malformed or names something the client may not use', example, text);
/** The mount refuses input PostgreSQL cannot store before the provider sees it (plugin.ts). */
const refusedInput = oauthError(
  'A NUL character in the query, refused before the provider sees it',
  'invalid_request',
  'Request contains a NUL character',
);
const badClient = oauthError(
  'Client authentication failed; with HTTP Basic the answer carries WWW-Authenticate',
  'invalid_client',
  'client authentication failed',
);

function formBody(schema: Json, example: Json): Json {
  return { required: true, content: { [FORM]: { schema: { type: 'object', ...schema }, example } } };
}

function jsonAnswer(description: string, schema: Json, example: unknown, headers?: Json): Json {
  return { description, ...(headers ? { headers } : {}), content: { 'application/json': { schema, example } } };
}

const clientCredentialsFields = {
  client_id: { type: 'string', description: 'The client id (client_secret_post and public clients)' },
  client_secret: { type: 'string', description: 'The client secret (client_secret_post only)' },
};

const tokenFields = {
  token: { type: 'string', description: 'The access or refresh token' },
  token_type_hint: { type: 'string', enum: ['access_token', 'refresh_token'] },
  ...clientCredentialsFields,
};

const dpopHeader = {
  name: 'DPoP',
  in: 'header',
  required: false,
  description: 'A DPoP proof (RFC 9449) binding the issued token to the key that signed it',
  schema: { type: 'string' },
  example: 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2In0.eyJodG0iOiJQT1NUIn0.c2lnbmF0dXJl',
};

function token(): Json {
  return {
    operationId: 'token',
    summary: 'Token endpoint',
    description:
      'Issues tokens for the grants authorization_code (with PKCE), refresh_token (rotated on every use), ' +
      'client_credentials (RFC 9068 JWT for the API the scopes name) and the device code (RFC 8628). ' +
      'With a DPoP proof the token is sender-constrained (token_type DPoP).',
    tags: ['oauth'],
    ...CLIENT_AUTH,
    parameters: [dpopHeader],
    requestBody: formBody(
      {
        required: ['grant_type'],
        properties: {
          grant_type: {
            type: 'string',
            enum: [
              'authorization_code',
              'refresh_token',
              'client_credentials',
              'urn:ietf:params:oauth:grant-type:device_code',
            ],
          },
          code: { type: 'string', description: 'authorization_code: the code from the redirect' },
          redirect_uri: { type: 'string', format: 'uri', description: 'authorization_code: as sent to authorization' },
          code_verifier: { type: 'string', description: 'authorization_code: the PKCE verifier' },
          refresh_token: { type: 'string', description: 'refresh_token: the current refresh token' },
          device_code: { type: 'string', description: 'device code grant: the device_code' },
          scope: { type: 'string', description: 'client_credentials: the API scopes, space-separated' },
          resource: { type: 'string', format: 'uri', description: 'RFC 8707 resource indicator' },
          ...clientCredentialsFields,
        },
      },
      { grant_type: 'client_credentials', scope: 'passkey.read passkey.delete' },
    ),
    responses: {
      200: jsonAnswer(
        'The tokens',
        { $ref: '#/components/schemas/TokenResponse' },
        {
          access_token: 'eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6ImsxIn0.eyJpc3MiOiJodHRwcyJ9.c2ln',
          token_type: 'Bearer',
          expires_in: 3600,
          scope: 'passkey.read passkey.delete',
        },
      ),
      400: badRequest('invalid_grant', 'grant request is invalid'),
      401: badClient,
    },
  };
}

function revocation(): Json {
  return {
    operationId: 'revokeToken',
    summary: 'Revoke a token (RFC 7009)',
    description: 'A client revokes its own access or refresh token; revoking a refresh token ends its grant.',
    tags: ['oauth'],
    ...CLIENT_AUTH,
    requestBody: formBody(
      { required: ['token'], properties: tokenFields },
      { token: '4VtbQz8yM3oJxk2w1bVnZt1rF0u9mHc7bYQp6eXsWdA', token_type_hint: 'refresh_token' },
    ),
    responses: {
      200: { description: 'Revoked, or the token was unknown or already invalid (RFC 7009 2.2)' },
      400: badRequest(),
      401: badClient,
    },
  };
}

function introspection(): Json {
  return {
    operationId: 'introspectToken',
    summary: 'Introspect a token (RFC 7662)',
    description:
      'A confidential client learns about its own tokens and tokens naming it as audience; a resource server ' +
      "registered with --introspection also about the access tokens of its organizations' users and the service's " +
      'JWT access tokens (client_credentials, RFC 9068); anyone else gets {"active": false}. A caller that does not ' +
      'authenticate (no credentials, or a public client) gets 401 invalid_client with a Basic challenge. ' +
      'With Accept: application/token-introspection+jwt the answer is a signed JWT (RFC 9701).',
    tags: ['oauth'],
    ...CLIENT_AUTH,
    requestBody: formBody(
      { required: ['token'], properties: tokenFields },
      { token: '4VtbQz8yM3oJxk2w1bVnZt1rF0u9mHc7bYQp6eXsWdA' },
    ),
    responses: {
      200: {
        description: 'Whether the token is active and, when it is, what it carries',
        content: {
          'application/json': {
            schema: { $ref: '#/components/schemas/Introspection' },
            example: {
              active: true,
              client_id: 'helpdesk',
              scope: 'passkey.read',
              token_type: 'Bearer',
              exp: 1767225600,
              iat: 1767222000,
            },
          },
          'application/token-introspection+jwt': {
            schema: { type: 'string', description: 'A signed JWT whose token_introspection claim is the answer' },
            example: 'eyJhbGciOiJFUzI1NiIsInR5cCI6InRva2VuLWludHJvc3BlY3Rpb24rand0In0.eyJpc3MiOiJodHRwcyJ9.c2ln',
          },
        },
      },
      400: badRequest(),
      401: badClient,
    },
  };
}

const authorizationFields: Json = {
  response_type: { type: 'string', enum: ['code'] },
  client_id: { type: 'string' },
  redirect_uri: { type: 'string', format: 'uri', description: 'One of the client’s registered redirect URIs' },
  scope: { type: 'string', description: 'Space-separated; must include openid', default: 'openid' },
  state: { type: 'string' },
  nonce: { type: 'string' },
  code_challenge: { type: 'string', description: 'PKCE (required of public clients)' },
  code_challenge_method: { type: 'string', enum: ['S256'] },
  prompt: { type: 'string', enum: ['none', 'login', 'consent'] },
  max_age: { type: 'integer', minimum: 0 },
  acr_values: { type: 'string', description: 'Requested authentication context, e.g. a passkey' },
  claims: { type: 'string', description: 'OIDC claims request (JSON)' },
  login_hint: { type: 'string' },
  ui_locales: { type: 'string', description: 'en or nb' },
  request_uri: { type: 'string', description: 'A request_uri from the pushed authorization request endpoint' },
};

const authorizationExample = {
  response_type: 'code',
  client_id: 'wiki',
  redirect_uri: 'https://wiki.example.org/callback',
  scope: 'openid profile',
  state: 'af0ifjsldkj',
  code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
  code_challenge_method: 'S256',
};

function authorizationParameters(): Json[] {
  const required = new Set(['client_id']);
  return Object.entries(authorizationFields).map(([name, schema]) => ({
    name,
    in: 'query',
    required: required.has(name),
    schema,
    ...(name in authorizationExample
      ? { example: authorizationExample[name as keyof typeof authorizationExample] }
      : {}),
  }));
}

function authorization(): Json {
  return {
    operationId: 'authorize',
    summary: 'Authorization endpoint (browser)',
    description:
      'Starts a sign-in: the browser is sent to the sign-in pages and, when the user has signed in and consented, ' +
      'back to redirect_uri with code and state (or error). Parameters go in the query (or in a pushed request, request_uri).',
    tags: ['oauth'],
    ...PUBLIC,
    parameters: authorizationParameters(),
    responses: {
      200: {
        description: 'response_mode=form_post: a page whose form posts code and state to redirect_uri',
        content: { 'text/html': { schema: { type: 'string' }, example: '<!DOCTYPE html><form method="post">' } },
      },
      303: {
        description:
          'To the sign-in pages, or back to redirect_uri with code and state (or error and error_description)',
        headers: {
          location: {
            description: 'Where the browser goes next',
            schema: { type: 'string', format: 'uri' },
            example: 'https://wiki.example.org/callback?code=Xy1bQ&state=af0ifjsldkj',
          },
        },
      },
      400: {
        description: 'An error page, when the client or redirect_uri cannot be trusted to receive the error',
        content: { 'text/html': { schema: { type: 'string' }, example: '<!DOCTYPE html><title>Error</title>' } },
      },
    },
  };
}

function pushedAuthorization(): Json {
  return {
    operationId: 'pushAuthorizationRequest',
    summary: 'Pushed authorization request (RFC 9126)',
    description:
      'A client sends the authorization parameters directly and gets a request_uri to pass to the authorization endpoint.',
    tags: ['oauth'],
    ...CLIENT_AUTH,
    parameters: [dpopHeader],
    requestBody: formBody(
      { required: ['response_type', 'client_id', 'redirect_uri'], properties: { ...authorizationFields } },
      authorizationExample,
    ),
    responses: {
      201: jsonAnswer(
        'The request was stored',
        {
          type: 'object',
          required: ['request_uri', 'expires_in'],
          properties: { request_uri: { type: 'string' }, expires_in: { type: 'integer' } },
        },
        { request_uri: 'urn:ietf:params:oauth:request_uri:6esc_11ACC5bwc014ltc14eY22c', expires_in: 60 },
      ),
      400: badRequest(
        'invalid_redirect_uri',
        "redirect_uri did not match any of the client's registered redirect_uris",
      ),
      401: badClient,
    },
  };
}

function deviceAuthorization(publicUrl: string): Json {
  return {
    operationId: 'deviceAuthorization',
    summary: 'Device authorization (RFC 8628)',
    description:
      'A device without a browser gets a user code to show; the user enters it at verification_uri while the device polls the token endpoint.',
    tags: ['oauth'],
    ...CLIENT_AUTH,
    requestBody: formBody(
      { required: ['client_id'], properties: { ...clientCredentialsFields, scope: { type: 'string' } } },
      { client_id: 'tv-app', scope: 'openid profile' },
    ),
    responses: {
      200: jsonAnswer(
        'The codes',
        {
          type: 'object',
          required: ['device_code', 'user_code', 'verification_uri', 'expires_in'],
          properties: {
            device_code: { type: 'string' },
            user_code: { type: 'string' },
            verification_uri: { type: 'string', format: 'uri' },
            verification_uri_complete: { type: 'string', format: 'uri' },
            expires_in: { type: 'integer' },
            interval: { type: 'integer', description: 'Seconds to wait between token requests' },
          },
        },
        {
          device_code: 'GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS',
          user_code: 'WDJB-MJHT',
          verification_uri: `${publicUrl}${ROUTES.code_verification}`,
          verification_uri_complete: `${publicUrl}${ROUTES.code_verification}?user_code=WDJB-MJHT`,
          expires_in: 600,
          interval: 5,
        },
      ),
      400: badRequest('invalid_scope', 'requested scope is not allowed'),
      401: badClient,
    },
  };
}

function discovery(publicUrl: string, operationId: string, summary: string): Json {
  return {
    operationId,
    summary,
    description:
      'The authorization server metadata (issuer, endpoints, supported grants, scopes, algorithms); both well-known paths answer the same document.',
    tags: ['openid'],
    ...PUBLIC,
    responses: {
      200: jsonAnswer(
        'The metadata',
        { $ref: '#/components/schemas/ProviderMetadata' },
        {
          issuer: publicUrl,
          authorization_endpoint: `${publicUrl}${ROUTES.authorization}`,
          token_endpoint: `${publicUrl}${ROUTES.token}`,
          jwks_uri: `${publicUrl}${ROUTES.jwks}`,
          userinfo_endpoint: `${publicUrl}${ROUTES.userinfo}`,
          end_session_endpoint: `${publicUrl}${ROUTES.end_session}`,
          response_types_supported: ['code', 'none'],
          grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
          scopes_supported: ['openid', 'offline_access', 'profile', 'email'],
        },
      ),
      400: refusedInput,
    },
  };
}

function jwks(): Json {
  return {
    operationId: 'jwks',
    summary: 'Public signing keys (JWKS)',
    description: 'The keys ID tokens and access tokens are signed with, in the same order on every instance.',
    tags: ['openid'],
    ...PUBLIC,
    responses: {
      200: {
        description: 'The JSON Web Key Set',
        content: {
          'application/jwk-set+json': {
            schema: { $ref: '#/components/schemas/JWKS' },
            example: {
              keys: [
                {
                  kty: 'EC',
                  crv: 'P-256',
                  kid: 'k1',
                  use: 'sig',
                  alg: 'ES256',
                  x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
                  y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
                },
              ],
            },
          },
        },
      },
      400: refusedInput,
    },
  };
}

function userinfoPost(): Json {
  return {
    operationId: 'userinfoPost',
    summary: 'OpenID Connect userinfo (POST)',
    description: 'The same as GET; the access token may also be sent as access_token in the form body (RFC 6750 2.2).',
    tags: ['userinfo'],
    security: [{ bearer: [] }, {}],
    requestBody: {
      required: false,
      content: {
        [FORM]: {
          schema: { type: 'object', properties: { access_token: { type: 'string' } } },
          example: { access_token: 'Wp9nA2vQ0y8Xr3kLmT5sHc1dFj7gUe4oBi6zNq2aYxE' },
        },
      },
    },
    responses: {
      200: jsonAnswer(
        'Claims of the signed-in user',
        { type: 'object', required: ['sub'], properties: { sub: { type: 'string' } }, additionalProperties: true },
        { sub: '3f1c5a9e-2b7d-4c1e-9a3f-6d2b8e0c4f71', name: 'Alice Example' },
      ),
      400: badRequest('invalid_request', 'no access token provided'),
      401: oauthError('The token is missing, expired or revoked', 'invalid_token', 'invalid token provided'),
      403: oauthError('The token lacks the openid scope', 'insufficient_scope', 'access token missing openid scope'),
    },
  };
}

const endSessionFields: Json = {
  id_token_hint: { type: 'string', description: 'An ID token the service issued to the client' },
  post_logout_redirect_uri: { type: 'string', format: 'uri', description: 'One of the client’s registered URIs' },
  state: { type: 'string' },
  client_id: { type: 'string' },
  logout_hint: { type: 'string' },
  ui_locales: { type: 'string' },
};

function endSession(): Json {
  const example = {
    id_token_hint: 'eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhIn0.c2ln',
    post_logout_redirect_uri: 'https://wiki.example.org/signed-out',
    state: 'x7Yq',
  };
  return {
    operationId: 'endSession',
    summary: 'End the session: RP-initiated logout (browser)',
    description:
      'Shows the sign-out confirmation page; after it the session ends, back-channel and front-channel logouts are sent ' +
      'and the browser goes to post_logout_redirect_uri (or a signed-out page).',
    tags: ['openid'],
    ...PUBLIC,
    parameters: Object.entries(endSessionFields).map(([name, schema]) => ({
      name,
      in: 'query',
      required: false,
      schema,
      ...(name in example ? { example: example[name as keyof typeof example] } : {}),
    })),
    responses: {
      200: {
        description: 'The sign-out confirmation page',
        content: { 'text/html': { schema: { type: 'string' }, example: '<!DOCTYPE html><title>Sign out</title>' } },
      },
      400: {
        description: 'An error page (unknown client, unregistered post_logout_redirect_uri, invalid id_token_hint)',
        content: { 'text/html': { schema: { type: 'string' }, example: '<!DOCTYPE html><title>Error</title>' } },
      },
    },
  };
}

/** Path items for the provider's endpoints, keyed by OpenAPI path. */
export function providerOpenApiPaths(publicUrl: string): Record<string, Json> {
  return {
    [ROUTES.authorization]: { get: authorization() },
    [ROUTES.pushed_authorization_request]: { post: pushedAuthorization() },
    [ROUTES.token]: { post: token() },
    [ROUTES.revocation]: { post: revocation() },
    [ROUTES.introspection]: { post: introspection() },
    [ROUTES.device_authorization]: { post: deviceAuthorization(publicUrl) },
    '/.well-known/openid-configuration': {
      get: discovery(publicUrl, 'openidConfiguration', 'OpenID Connect discovery'),
    },
    '/.well-known/oauth-authorization-server': {
      get: discovery(
        publicUrl,
        'oauthAuthorizationServerMetadata',
        'OAuth 2.0 authorization server metadata (RFC 8414)',
      ),
    },
    [ROUTES.jwks]: { get: jwks() },
    [ROUTES.userinfo]: { post: userinfoPost() },
    [ROUTES.end_session]: { get: endSession() },
  };
}
