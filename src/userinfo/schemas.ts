// Route schemas of the userinfo endpoints, for the OpenAPI document. Inputs are checked by the
// handlers (after authentication, with specific messages); the schemas describe them.
const errorBody = {
  type: 'object',
  description: 'Error: code equals the HTTP status; 400, 401 and 403 carry an RFC 6750 WWW-Authenticate challenge',
  required: ['code', 'message'],
  properties: { code: { type: 'integer' }, message: { type: 'string' } },
  additionalProperties: false,
} as const;

const userToken = 'A user access token from the authorization code flow, in Authorization: Bearer.';
const security = [{ bearer: [] }];

const errorExample = (code: number, message: string) => ({ ...errorBody, examples: [{ code, message }] });

/** oidc-provider's error body, for the answers it gives on the userinfo path. */
const oauthError = (description: string, error: string, errorDescription: string) => ({
  description,
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'string' }, error_description: { type: 'string' } },
  examples: [{ error, error_description: errorDescription }],
});

const photoHandle = 'p:0b7e1a52-6c1d-4f3e-9d2a-5b8c7e6f4a31';

export const oidcUserinfoSchema = {
  operationId: 'userinfo',
  summary: 'OpenID Connect userinfo',
  description: `${userToken} The token must be granted openid. Claims depend on the attribute groups of the client and the granted scopes (docs/userinfo.md). Also answers POST. Errors are oidc-provider's: { error, error_description } with an RFC 6750 challenge.`,
  tags: ['userinfo'],
  security,
  response: {
    200: {
      type: 'object',
      description:
        'Claims of the signed-in user (application/json, or application/jwt for clients registered for signed userinfo)',
      additionalProperties: true,
      examples: [
        {
          sub: '3f1c5a9e-2b7d-4c1e-9a3f-6d2b8e0c4f71',
          name: 'Alice Example',
          email: 'alice.example@example.org',
          picture: 'https://idp.example.org/userinfo/v1/user/media/p:0b7e1a52-6c1d-4f3e-9d2a-5b8c7e6f4a31',
        },
      ],
    },
    400: oauthError('The request is malformed (e.g. two tokens)', 'invalid_request', 'no access token provided'),
    401: oauthError('The token is missing, expired or revoked', 'invalid_token', 'invalid token provided'),
    403: oauthError('The token lacks the openid scope', 'insufficient_scope', 'access token missing openid scope'),
  },
};

export const legacyUserinfoSchema = {
  operationId: 'legacyUserinfo',
  summary: 'Legacy userinfo (deprecated)',
  description: `Deprecated: use /openid/userinfo. ${userToken} An application that signs users in with it must check that audience equals its own client id.`,
  tags: ['userinfo'],
  deprecated: true,
  security,
  response: {
    200: {
      type: 'object',
      required: ['user', 'audience'],
      properties: {
        user: {
          type: 'object',
          required: ['userid'],
          properties: {
            userid: { type: 'string', description: 'Opaque user id (the OIDC sub)' },
            userid_sec: {
              type: 'array',
              items: { type: 'string' },
              description: '<namespace>:<identifier> ids the client may see',
            },
            name: { type: 'string' },
            email: { type: 'string' },
            profilephoto: { type: 'string', description: 'Photo handle p:<uuid>' },
          },
          additionalProperties: false,
        },
        audience: { type: 'string', description: 'Client id the token was issued to' },
      },
      additionalProperties: false,
      examples: [
        {
          user: {
            userid: '3f1c5a9e-2b7d-4c1e-9a3f-6d2b8e0c4f71',
            userid_sec: ['feide:alice@example.org'],
            name: 'Alice Example',
            email: 'alice.example@example.org',
            profilephoto: photoHandle,
          },
          audience: 'wiki',
        },
      ],
    },
    400: errorExample(400, 'Bearer access token required'),
    401: errorExample(401, 'The access token is invalid or has expired'),
  },
};

export const photoSchema = {
  operationId: 'profilePhoto',
  summary: 'Profile photo by handle',
  description: `${userToken} The client must hold the userinfo-photo attribute group. Answers image/jpeg (longest edge 128 px) with ETag and Last-Modified; 304 on If-None-Match or If-Modified-Since.`,
  tags: ['userinfo'],
  security,
  params: {
    type: 'object',
    required: ['handle'],
    properties: {
      handle: {
        type: 'string',
        description: 'p:<uuid>, as in profilephoto or at the end of picture',
        examples: [photoHandle],
      },
    },
  },
  response: {
    // The photo is sent as bytes; these entries only describe it (bytes are never serialized).
    200: {
      description: 'The photo (JPEG, longest edge 128 px)',
      headers: {
        etag: { type: 'string', description: 'Entity tag for If-None-Match' },
        'last-modified': { type: 'string', description: 'For If-Modified-Since' },
      },
      content: { 'image/jpeg': { schema: { type: 'string', contentMediaType: 'image/jpeg' } } },
    },
    304: { description: 'Not modified since the ETag or date the client has', type: 'null' },
    400: errorExample(400, "Invalid photo handle: expected 'p:' followed by a UUID"),
    401: errorExample(401, 'The access token is invalid or has expired'),
    403: errorExample(403, 'Client is not authorized for the userinfo-photo attribute group'),
    404: errorExample(404, 'Photo does not exist'),
  },
};

export const hiddenSchema = { hide: true } as const;
