// JSON schemas of the recovery link API (/2/recovery-link): they document it in the OpenAPI
// document; input is checked by the route's own steps, each refusal with the documented message.
import { errorResponses } from './schema-parts.ts';

const LINK_EXAMPLE = {
  id: 17,
  eppn: 'alice@example.org',
  state: 'usable',
  created_at: '2026-11-26T09:00:00+00:00',
  expires_at: '2026-11-27T09:00:00+00:00',
  used_at: null,
  created_by: 'client:helpdesk-portal',
  delete_others: false,
};

const COMMON_ERRORS = {
  401: 'Token missing or invalid',
  403: 'Token lacks recovery.manage; client not authorized for the organization; eppn realm differs from the organization',
  404: 'Organization (or user, or link) does not exist',
};

const security = [{ oauth2: ['recovery.manage'] }];
const tags = ['recovery'];
const orgIdParam = {
  type: 'string',
  pattern: '^[0-9]+$',
  description: 'Numeric organization id',
  examples: ['1234'],
} as const;

const link = {
  type: 'object',
  required: ['id', 'eppn', 'state', 'created_at', 'expires_at', 'used_at', 'created_by', 'delete_others'],
  properties: {
    id: { type: 'integer' },
    eppn: { type: 'string' },
    state: { type: 'string', enum: ['usable', 'used', 'revoked', 'expired'] },
    created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: 'string', format: 'date-time' },
    used_at: { type: ['string', 'null'], format: 'date-time' },
    created_by: { type: 'string', description: 'client:<client_id>, operator:<login>, ...' },
    delete_others: { type: 'boolean', description: "The user's other passkeys go when the link is used" },
  },
} as const;

export const createSchema = {
  operationId: 'createRecoveryLink',
  tags,
  security,
  summary: 'Create a one-time recovery link for a user',
  description:
    'Scope recovery.manage. The link lets the user register a new passkey without signing in; it is in this answer only (the service keeps its hash), works once, until it expires or is revoked. Audited, and a recovery_link.created event.',
  params: { type: 'object', required: ['org_id'], properties: { org_id: orgIdParam } },
  body: {
    type: 'object',
    required: ['eppn'],
    additionalProperties: false,
    properties: {
      eppn: { type: 'string', description: "The user, of the organization's realm" },
      ttl_seconds: {
        type: 'integer',
        minimum: 60,
        maximum: 2592000,
        default: 86400,
        description: 'How long it works (60 s to 30 days)',
      },
      delete_others: { type: 'boolean', default: false, description: "Delete the user's other passkeys on use" },
    },
    examples: [{ eppn: 'alice@example.org', ttl_seconds: 86400, delete_others: true }],
  },
  response: {
    201: {
      description: 'The link, shown this once',
      type: 'object',
      required: ['id', 'eppn', 'url', 'expires_at', 'delete_others'],
      properties: {
        id: { type: 'integer' },
        eppn: { type: 'string' },
        url: { type: 'string', format: 'uri', description: '<PUBLIC_URL>/recover/<secret>' },
        expires_at: { type: 'string', format: 'date-time' },
        delete_others: { type: 'boolean' },
      },
      examples: [
        {
          id: 17,
          eppn: 'alice@example.org',
          url: 'https://idp.example.org/recover/q7bD2x0cVJ3mN9sT1uW4yZ6aB8eF0hK2lP5rS7tV9wX',
          expires_at: '2026-11-27T09:00:00+00:00',
          delete_others: true,
        },
      ],
    },
    ...errorResponses({
      400: 'Body not JSON, eppn missing or malformed, ttl_seconds out of range, unknown field',
      ...COMMON_ERRORS,
    }),
  },
} as const;

export const listSchema = {
  operationId: 'listRecoveryLinks',
  tags,
  security,
  summary: "List recovery links (never the links themselves): a user's, or the organization's",
  description: 'Scope recovery.manage. Newest first.',
  params: { type: 'object', required: ['org_id'], properties: { org_id: orgIdParam } },
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: { eppn: { type: 'string', description: 'Only this user', examples: ['alice@example.org'] } },
  },
  response: {
    200: { description: 'The links', type: 'array', items: link, examples: [[LINK_EXAMPLE]] },
    ...errorResponses({ 400: 'eppn malformed, unknown or repeated parameter', ...COMMON_ERRORS }),
  },
} as const;

export const revokeSchema = {
  operationId: 'revokeRecoveryLink',
  tags,
  security,
  summary: 'Revoke a recovery link that has not been used',
  description:
    'Scope recovery.manage. A link of another organization, or one used or revoked, is reported as not existing.',
  params: {
    type: 'object',
    required: ['org_id', 'id'],
    properties: { org_id: orgIdParam, id: { type: 'string', pattern: '^[0-9]+$', examples: ['17'] } },
  },
  response: {
    200: {
      description: 'Revoked',
      type: 'object',
      required: ['id', 'revoked'],
      properties: { id: { type: 'integer' }, revoked: { type: 'boolean' } },
      examples: [{ id: 17, revoked: true }],
    },
    ...errorResponses(COMMON_ERRORS),
  },
} as const;
