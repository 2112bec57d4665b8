// The reusable parts of the OpenAPI document: security schemes, tags and shared schemas, and the
// descriptions of the routes whose plugins carry no schema of their own (health, metrics, the
// documentation itself).
import { API_SCOPES } from '../vocabulary.ts';

type Json = Record<string, unknown>;

const SCOPE_MEANING: Record<(typeof API_SCOPES)[number], string> = {
  'passkey.read': 'List the passkeys of the organizations the client administers',
  'passkey.delete': 'Delete passkeys of the organizations the client administers',
  'system-check-user-existence': 'Ask whether a user exists, by namespaced id or mail address',
  gk_checkuser: 'Legacy user-existence check (with gk_checkuser_systemlookup)',
  gk_checkuser_systemlookup: 'Legacy user-existence check (with gk_checkuser)',
  'ssf.manage':
    'Manage OpenID Shared Signals streams and poll their events (users of the organizations the client administers)',
  'recovery.manage': 'Create, list and revoke recovery links for users of the organizations the client administers',
  'audit.read': 'Read the audit trail of the organizations the client administers',
  'report.read': 'Read the passkey report of the organizations the client administers',
  scim: 'Provision users and groups over SCIM 2.0 (/scim/v2) in the one organization the client is granted',
  'system-all-users': 'Look up the directory attributes of users of the organizations the client is granted',
};

export function securitySchemes(publicUrl: string): Json {
  return {
    oauth2: {
      type: 'oauth2',
      description:
        'An RFC 9068 JWT access token from the client credentials grant, for the API its scopes name, sent as ' +
        '`Authorization: Bearer <token>`. A DPoP-bound token (cnf.jkt, RFC 9449) is sent as `Authorization: DPoP <token>` ' +
        'with a proof in the `DPoP` header.',
      flows: {
        clientCredentials: {
          tokenUrl: `${publicUrl}/oauth/token`,
          scopes: Object.fromEntries(API_SCOPES.map((s) => [s, SCOPE_MEANING[s]])),
        },
      },
    },
    bearer: {
      type: 'http',
      scheme: 'bearer',
      description:
        'A user access token from the authorization code (or device) flow, granted openid, in `Authorization: Bearer <token>`.',
    },
    clientBasic: {
      type: 'http',
      scheme: 'basic',
      description:
        'Client authentication (client_secret_basic): the client id and secret, each form-urlencoded, as user name and password.',
    },
    metricsToken: {
      type: 'http',
      scheme: 'bearer',
      description: 'The METRICS_TOKEN setting, when it is set.',
    },
  };
}

export const TAGS = [
  { name: 'passkey', description: 'Passkey administration for organization administrators and helpdesks' },
  { name: 'recovery', description: 'One-time recovery links for users who lost their passkeys (helpdesk automation)' },
  { name: 'audit', description: "An organization's audit trail (security audits, helpdesk automation)" },
  { name: 'report', description: "An organization's passkey coverage and authenticator report" },
  { name: 'scim', description: "SCIM 2.0 provisioning of an organization's users and groups (Entra ID, Okta)" },
  { name: 'user-existence', description: 'Whether a user exists, for systems that provision or look up accounts' },
  { name: 'userinfo', description: 'Claims and photos of the signed-in user, for relying parties' },
  { name: 'groups', description: "The signed-in user's groups: organization, units, classes, teaching groups" },
  { name: 'oauth', description: 'The OAuth 2.0 authorization server (served by oidc-provider)' },
  { name: 'openid', description: 'OpenID Connect discovery, keys and logout (served by oidc-provider)' },
  { name: 'operations', description: 'Health probes and metrics for load balancers and monitoring' },
  {
    name: 'shared-signals',
    description: 'OpenID Shared Signals: security events about users (CAEP, RISC) for receivers, pushed or polled',
  },
  { name: 'saml', description: 'The SAML 2.0 identity provider: its metadata and protocol endpoints (docs/saml.md)' },
  { name: 'documentation', description: 'This document and its rendered reference' },
];

const errorBody: Json = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: { type: 'integer', description: 'The HTTP status' }, message: { type: 'string' } },
};

export const SCHEMAS: Record<string, Json> = {
  OAuthError: {
    type: 'object',
    description: 'The OAuth 2.0 error body (RFC 6749 5.2)',
    required: ['error'],
    properties: {
      error: { type: 'string', description: 'invalid_request, invalid_client, invalid_grant, invalid_scope, ...' },
      error_description: { type: 'string' },
    },
  },
  TokenResponse: {
    type: 'object',
    required: ['access_token', 'token_type', 'expires_in'],
    properties: {
      access_token: { type: 'string' },
      token_type: { type: 'string', enum: ['Bearer', 'DPoP'] },
      expires_in: { type: 'integer', description: 'Seconds' },
      scope: { type: 'string' },
      refresh_token: { type: 'string', description: 'authorization_code and refresh_token grants with offline_access' },
      id_token: { type: 'string', description: 'authorization_code grant with openid' },
    },
  },
  Introspection: {
    type: 'object',
    required: ['active'],
    properties: {
      active: { type: 'boolean' },
      client_id: { type: 'string' },
      scope: { type: 'string' },
      sub: { type: 'string' },
      aud: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
      iss: { type: 'string' },
      token_type: { type: 'string' },
      exp: { type: 'integer' },
      iat: { type: 'integer' },
    },
  },
  ProviderMetadata: {
    type: 'object',
    description: 'OpenID Connect Discovery 1.0 / RFC 8414 metadata',
    required: ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'response_types_supported'],
    properties: {
      issuer: { type: 'string', format: 'uri' },
      authorization_endpoint: { type: 'string', format: 'uri' },
      token_endpoint: { type: 'string', format: 'uri' },
      jwks_uri: { type: 'string', format: 'uri' },
      userinfo_endpoint: { type: 'string', format: 'uri' },
      end_session_endpoint: { type: 'string', format: 'uri' },
      response_types_supported: { type: 'array', items: { type: 'string' } },
      grant_types_supported: { type: 'array', items: { type: 'string' } },
      scopes_supported: { type: 'array', items: { type: 'string' } },
    },
    additionalProperties: true,
  },
  JWKS: {
    type: 'object',
    required: ['keys'],
    properties: {
      keys: {
        type: 'array',
        items: {
          type: 'object',
          required: ['kty', 'kid'],
          properties: { kty: { type: 'string' }, kid: { type: 'string' }, alg: { type: 'string' } },
          additionalProperties: true,
        },
      },
    },
  },
};

const statusBody = (status: string): Json => ({
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: [status] } },
  examples: [{ status }],
});

/** Any request with a malformed URL, or a NUL in its query, a path parameter or its body, is refused first. */
const malformed: Json = {
  description:
    'A malformed URL (bad percent-encoding) or input the service refuses (a NUL character in the query, the path or the body)',
  ...errorBody,
  examples: [{ code: 400, message: 'Malformed request URL' }],
};

const text = (description: string, example: string): Json => ({
  description,
  content: { 'text/plain': { schema: { type: 'string' }, example } },
});

/** Route schemas, by URL, for routes that carry none. */
export const ROUTE_SCHEMAS: Record<string, Json> = {
  '/healthz': {
    operationId: 'healthz',
    summary: 'Liveness probe',
    description: 'The process answers HTTP.',
    tags: ['operations'],
    security: [],
    response: { 200: { description: 'Alive', ...statusBody('ok') }, 400: malformed },
  },
  '/readyz': {
    operationId: 'readyz',
    summary: 'Readiness probe',
    description: 'The database answers; a load balancer sends traffic only to ready instances.',
    tags: ['operations'],
    security: [],
    response: {
      200: {
        description: 'Ready; `version` is the running release (package.json, semver)',
        type: 'object',
        required: ['status', 'version'],
        properties: { status: { type: 'string', enum: ['ready'] }, version: { type: 'string' } },
        examples: [{ status: 'ready', version: '0.1.0' }],
      },
      400: malformed,
      503: {
        description: 'The database is unreachable',
        ...errorBody,
        examples: [{ code: 503, message: 'Database unreachable' }],
      },
    },
  },
  '/metrics': {
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    description:
      'Only from addresses in METRICS_ALLOW (default loopback and private ranges); with METRICS_TOKEN set, only with that bearer token.',
    tags: ['operations'],
    security: [{ metricsToken: [] }, {}],
    response: {
      200: text('Metrics in the Prometheus text format', '# TYPE idp_info gauge\nidp_info{version="0.1.0"} 1\n'),
      401: {
        description: 'METRICS_TOKEN is set and the token is missing or wrong',
        ...errorBody,
        examples: [{ code: 401, message: 'Bearer token required' }],
      },
      403: {
        description: 'The client address is not in METRICS_ALLOW',
        ...errorBody,
        examples: [{ code: 403, message: 'Metrics are not available from this address' }],
      },
    },
  },
  '/saml2/idp/metadata': {
    operationId: 'samlIdpMetadata',
    summary: "The SAML identity provider's metadata (its URL is also its entityID)",
    description:
      'A signed md:EntityDescriptor (application/samlmetadata+xml): single sign-on and logout endpoints, signing and ' +
      'encryption certificates (two during a key rollover), NameID formats, shibmd:Scope of each organization, ' +
      'mdui display name and logo. validUntil is 7 days ahead, cacheDuration 6 hours.',
    tags: ['saml'],
    security: [],
    response: {
      200: {
        description: 'The signed metadata document',
        content: {
          'application/samlmetadata+xml': {
            schema: { type: 'string' },
            example: '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="...">',
          },
        },
      },
      400: malformed,
    },
  },
  '/saml2/sp/metadata': {
    operationId: 'samlSpMetadata',
    summary: "The service's SAML service provider metadata, for upstream SAML identity providers (docs/upstream.md)",
    description:
      'A signed md:EntityDescriptor (application/samlmetadata+xml) with an SPSSODescriptor: the assertion consumer ' +
      'service (HTTP-POST), signing and encryption certificates, AuthnRequestsSigned and WantAssertionsSigned. An ' +
      "organization's upstream IdP registers it; its URL is the entityID.",
    tags: ['saml'],
    security: [],
    response: {
      200: {
        description: 'The signed metadata document',
        content: {
          'application/samlmetadata+xml': {
            schema: { type: 'string' },
            example: '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="...">',
          },
        },
      },
      400: malformed,
    },
  },
  '/openapi.json': {
    operationId: 'openapi',
    summary: 'This OpenAPI 3.1 document',
    tags: ['documentation'],
    security: [],
    response: {
      200: {
        description: 'The document',
        type: 'object',
        required: ['openapi', 'info', 'paths'],
        properties: { openapi: { type: 'string' }, info: { type: 'object' }, paths: { type: 'object' } },
        additionalProperties: true,
        examples: [{ openapi: '3.1.0', info: { title: 'Identity provider API', version: '2' }, paths: {} }],
      },
      400: malformed,
    },
  },
  '/docs': {
    operationId: 'apiReference',
    summary: 'The API reference, rendered from this document (browser)',
    tags: ['documentation'],
    security: [],
    response: {
      200: {
        description: 'An HTML page; its scripts and styles come from /docs/static/',
        content: {
          'text/html': { schema: { type: 'string' }, example: '<!DOCTYPE html><title>API reference</title>' },
        },
      },
      400: malformed,
    },
  },
};
