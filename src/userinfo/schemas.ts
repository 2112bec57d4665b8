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

export const oidcUserinfoSchema = {
  summary: 'OpenID Connect userinfo',
  description: `${userToken} The token must be granted openid. Claims depend on the attribute groups of the client and the granted scopes (docs/userinfo.md). Also answers POST. Errors are oidc-provider's: { error, error_description } with an RFC 6750 challenge.`,
  tags: ['userinfo'],
  response: {
    200: {
      type: 'object',
      description:
        'Claims of the signed-in user (application/json, or application/jwt for clients registered for signed userinfo)',
      additionalProperties: true,
    },
  },
};

export const legacyUserinfoSchema = {
  summary: 'Legacy userinfo (deprecated)',
  description: `Deprecated: use /openid/userinfo. ${userToken} An application that signs users in with it must check that audience equals its own client id.`,
  tags: ['userinfo'],
  deprecated: true,
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
    },
    400: errorBody,
    401: errorBody,
  },
};

export const photoSchema = {
  summary: 'Profile photo by handle',
  description: `${userToken} The client must hold the userinfo-photo attribute group. Answers image/jpeg (longest edge 128 px) with ETag and Last-Modified; 304 on If-None-Match or If-Modified-Since.`,
  tags: ['userinfo'],
  params: {
    type: 'object',
    required: ['handle'],
    properties: { handle: { type: 'string', description: 'p:<uuid>, as in profilephoto or at the end of picture' } },
  },
  response: { 400: errorBody, 401: errorBody, 403: errorBody, 404: errorBody },
};

export const hiddenSchema = { hide: true } as const;
