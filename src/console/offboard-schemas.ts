// JSON schema of bulk offboarding (/2/offboard): documents it in the OpenAPI document.
import { errorResponses, orgIdParams } from './schema-parts.ts';

const ERRORS: Record<number, string> = {
  400: 'Body not a JSON object; eppns empty, over 10000 or with a bad line (malformed, another realm: the first are named, nothing is done); reason missing or over 500 characters; unknown field',
  401: 'Token missing or invalid',
  403: 'Token lacks passkey.delete; client not authorized for the organization',
  404: 'Organization does not exist',
};

export const offboardSchema = {
  operationId: 'offboardUsers',
  tags: ['passkey'],
  security: [{ oauth2: ['passkey.delete'] }],
  summary: 'Bulk offboarding: delete the passkeys of many users (dry run first)',
  description:
    "Scope passkey.delete. Each found user's passkeys are deleted as DELETE /2/passkey/{org_id}?eppn= does (audit record with the reason, events, sessions ended). dry_run: true only says who is found and how many passkeys would go. A list with any bad line is refused whole.",
  params: orgIdParams,
  body: {
    type: 'object',
    required: ['eppns', 'reason'],
    additionalProperties: false,
    properties: {
      eppns: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 10000 },
      reason: { type: 'string', minLength: 1, maxLength: 500 },
      dry_run: { type: 'boolean', default: false },
    },
    examples: [{ eppns: ['alice@example.org', 'bob@example.org'], reason: 'left the school', dry_run: true }],
  },
  response: {
    200: {
      description: 'Found users (with the passkeys that would go, or went), users not found, the total',
      type: 'object',
      properties: {
        dry_run: { type: 'boolean' },
        found: {
          type: 'array',
          items: { type: 'object', properties: { eppn: { type: 'string' }, passkeys: { type: 'integer' } } },
        },
        not_found: { type: 'array', items: { type: 'string' } },
        passkeys: { type: 'integer' },
      },
      examples: [
        {
          dry_run: true,
          found: [{ eppn: 'alice@example.org', passkeys: 2 }],
          not_found: ['bob@example.org'],
          passkeys: 2,
        },
      ],
    },
    ...errorResponses(ERRORS),
  },
} as const;
