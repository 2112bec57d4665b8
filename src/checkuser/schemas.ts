// JSON schemas of the user-existence routes; the OpenAPI document is generated from them.
import { MAX_EPPN, MAX_MAIL, MAX_USERID_SEC } from './identifiers.ts';

const errorBody = {
  type: 'object',
  description: 'Error: code equals the HTTP status',
  required: ['code', 'message'],
  properties: { code: { type: 'integer' }, message: { type: 'string' } },
  additionalProperties: false,
} as const;

const existsBody = {
  type: 'object',
  description: 'Whether the user exists',
  required: ['exists'],
  properties: {
    exists: {
      type: 'boolean',
      description:
        'true if the user exists. Organizations do not guarantee deletion of unused accounts, so it does not prove an active account',
    },
  },
  additionalProperties: false,
} as const;

const responses = {
  200: existsBody,
  400: errorBody,
  401: errorBody,
  403: errorBody,
  429: errorBody,
};

// Identifiers are checked by the handler, after authentication, so that an unauthenticated caller
// learns nothing and every bad identifier gets a specific message; the schemas only describe them.
export const legacyRouteSchema = {
  summary: 'Does a user exist (deprecated)',
  description:
    'Deprecated: use /userinfo/v1/exists/{userid_sec}. Requires scopes gk_checkuser and gk_checkuser_systemlookup.',
  tags: ['user-existence'],
  deprecated: true,
  security: [{ bearer: ['gk_checkuser', 'gk_checkuser_systemlookup'] }],
  params: {
    type: 'object',
    required: ['username'],
    properties: {
      username: {
        type: 'string',
        description: `username@domain (eduPersonPrincipalName), '@' sent as %40; at most ${MAX_EPPN} characters`,
      },
    },
  },
  response: responses,
};

export function existsRouteSchema(namespaces: string[]) {
  return {
    summary: 'Does a user with this namespaced id exist',
    tags: ['user-existence'],
    security: [{ bearer: ['system-check-user-existence'] }],
    params: {
      type: 'object',
      required: ['userid_sec'],
      properties: {
        userid_sec: {
          type: 'string',
          description: `<namespace>:<identifier>, percent-encoded; namespaces: ${namespaces.join(', ')}; at most ${MAX_USERID_SEC} characters`,
        },
      },
    },
    response: responses,
  };
}

export const mailRouteSchema = {
  summary: 'Does a user of the realm with this mail address exist',
  tags: ['user-existence'],
  security: [{ bearer: ['system-check-user-existence'] }],
  params: {
    type: 'object',
    required: ['realm', 'mail'],
    properties: {
      realm: { type: 'string', description: 'realm of the organization (the domain part of its eppns)' },
      mail: {
        type: 'string',
        description: `mail address, percent-encoded; compared case-insensitively; at most ${MAX_MAIL} characters`,
      },
    },
  },
  response: responses,
};

/** The same routes with the identifier left out: they only answer 400, so they stay out of the API document. */
export const hiddenSchema = { hide: true, response: responses };
