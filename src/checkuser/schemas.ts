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

const errorExample = (code: number, message: string) => ({ ...errorBody, examples: [{ code, message }] });

const responses = {
  200: { ...existsBody, examples: [{ exists: true }] },
  400: errorExample(400, "Identifier must have the form username@domain (no '@' found)"),
  401: errorExample(401, 'Token missing or invalid'),
  403: errorExample(403, 'Client not authorized for organization'),
  429: errorExample(429, 'Too many requests; try again later'),
};

// Identifiers are checked by the handler, after authentication, so that an unauthenticated caller
// learns nothing and every bad identifier gets a specific message; the schemas only describe them.
export const legacyRouteSchema = {
  operationId: 'checkSingle',
  summary: 'Does a user exist (deprecated)',
  description:
    'Deprecated: use /userinfo/v1/exists/{userid_sec}. Requires scopes gk_checkuser and gk_checkuser_systemlookup.',
  tags: ['user-existence'],
  deprecated: true,
  security: [{ oauth2: ['gk_checkuser', 'gk_checkuser_systemlookup'] }],
  params: {
    type: 'object',
    required: ['username'],
    properties: {
      username: {
        type: 'string',
        description: `username@domain (eduPersonPrincipalName), '@' sent as %40; at most ${MAX_EPPN} characters`,
        examples: ['alice@example.org'],
      },
    },
  },
  response: responses,
};

export function existsRouteSchema(namespaces: string[]) {
  return {
    operationId: 'userExists',
    summary: 'Does a user with this namespaced id exist',
    tags: ['user-existence'],
    security: [{ oauth2: ['system-check-user-existence'] }],
    params: {
      type: 'object',
      required: ['userid_sec'],
      properties: {
        userid_sec: {
          type: 'string',
          description: `<namespace>:<identifier>, percent-encoded; namespaces: ${namespaces.join(', ')}; at most ${MAX_USERID_SEC} characters`,
          examples: ['feide:alice@example.org'],
        },
      },
    },
    response: responses,
  };
}

export const mailRouteSchema = {
  operationId: 'userExistsByMail',
  summary: 'Does a user of the realm with this mail address exist',
  tags: ['user-existence'],
  security: [{ oauth2: ['system-check-user-existence'] }],
  params: {
    type: 'object',
    required: ['realm', 'mail'],
    properties: {
      realm: {
        type: 'string',
        description: 'realm of the organization (the domain part of its eppns)',
        examples: ['example.org'],
      },
      mail: {
        type: 'string',
        description: `mail address, percent-encoded; compared case-insensitively; at most ${MAX_MAIL} characters`,
        examples: ['alice.example@example.org'],
      },
    },
  },
  response: responses,
};

/** The same routes with the identifier left out: they only answer 400, so they stay out of the API document. */
export const hiddenSchema = { hide: true, response: responses };
