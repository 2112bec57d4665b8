// JSON schema of the audit API (/2/audit): documents it in the OpenAPI document; the query is
// checked by the route's own steps.
import { errorResponses, orgIdParams } from './schema-parts.ts';

const ERRORS: Record<number, string> = {
  400: 'Invalid query parameter (eppn, action, since, until, before, limit, format), unknown or repeated parameter',
  401: 'Token missing or invalid',
  403: 'Token lacks audit.read; client not authorized for the organization; eppn realm differs from the organization',
  404: 'Organization does not exist',
};

const RECORD_EXAMPLE = {
  id: 4711,
  at: '2026-11-26T09:15:02+00:00',
  action: 'passkey.delete',
  actor_type: 'client',
  actor: 'helpdesk-portal',
  subject: 'alice@example.org',
  org_id: 1234,
  client_id: 'helpdesk-portal',
  eppn: 'alice@example.org',
  passkey_ids: [17],
  source: '192.0.2.10',
  request_id: 'req-1a2b',
  details: { reason: 'lost phone' },
};

const string = (description: string, example: string) => ({ type: 'string', description, examples: [example] });

export const auditSchema = {
  operationId: 'listAuditRecords',
  tags: ['audit'],
  security: [{ oauth2: ['audit.read'] }],
  summary: "The organization's audit trail, newest first",
  description:
    'Scope audit.read. Keyset-paginated on the record id: when the page is full, the Link header carries the next page (before=<the last id>). format=csv gives the same records as CSV (a leading = + - @ in a field is prefixed with an apostrophe).',
  params: orgIdParams,
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: {
      eppn: string('Only records about this user', 'alice@example.org'),
      action: string("An action, or a family ending in '.'", 'passkey.'),
      actor: string('Who acted: an eppn, a client id, cli:<login>', 'helpdesk-portal'),
      since: string('Records at or after this ISO 8601 time', '2026-11-01T00:00:00Z'),
      until: string('Records before this ISO 8601 time', '2026-12-01T00:00:00Z'),
      before: string('Only records with a smaller id (the next page)', '4711'),
      limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100, examples: [100] },
      format: { type: 'string', enum: ['json', 'csv'], default: 'json', examples: ['csv'] },
    },
  },
  response: {
    200: {
      description: 'Audit records',
      headers: { link: { type: 'string', description: '<next page URL>; rel="next" when the page is full' } },
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'integer' },
          at: { type: 'string', format: 'date-time' },
          action: { type: 'string' },
          actor_type: { type: ['string', 'null'] },
          actor: { type: ['string', 'null'] },
          subject: { type: ['string', 'null'] },
          org_id: { type: ['integer', 'null'] },
          client_id: { type: ['string', 'null'] },
          eppn: { type: ['string', 'null'] },
          passkey_ids: { type: 'array', items: { type: 'integer' } },
          source: { type: ['string', 'null'] },
          request_id: { type: ['string', 'null'] },
          details: { type: 'object', additionalProperties: true },
        },
      },
      examples: [[RECORD_EXAMPLE]],
    },
    ...errorResponses(ERRORS),
  },
} as const;
