// JSON schemas of the /2/passkey routes. They document the API (OpenAPI) and drive the fast
// response serializer; input is checked by the route's own steps so that every rejection carries
// the documented status and message in the documented order (see docs/passkey-api.md).

const errorBody = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'integer', description: 'The HTTP status' },
    message: { type: 'string' },
  },
} as const;

const passkey = {
  type: 'object',
  required: ['id', 'eppn', 'label', 'created_at', 'last_used_at', 'mfa_verified', 'aaguid'],
  properties: {
    id: { type: 'integer', description: 'Internal unique identifier; the id of the single-passkey delete' },
    eppn: { type: 'string', description: 'eduPersonPrincipalName of the owning user' },
    label: { type: 'string', description: 'User-supplied name; need not reflect the authenticator model' },
    created_at: {
      type: 'string',
      format: 'date-time',
      description: 'Registration time, e.g. 2024-01-15T10:30:00+00:00',
    },
    last_used_at: {
      type: ['string', 'null'],
      format: 'date-time',
      description: 'Most recent authentication; null if never used',
    },
    mfa_verified: { type: 'boolean', description: 'Whether the passkey is verified as a multi-factor credential' },
    aaguid: {
      type: 'string',
      format: 'uuid',
      description:
        'Authenticator Attestation GUID (lowercase); 00000000-0000-0000-0000-000000000000 when the authenticator gave none',
    },
    authenticator: {
      type: 'object',
      description:
        'Only with details=authenticator (an extension; the fields above are the contract): what is known of the authenticator',
      required: ['name', 'synced', 'backed_up', 'user_verified', 'transports', 'attested', 'metadata_status'],
      properties: {
        name: { type: ['string', 'null'], description: "The model's name; null when unknown" },
        synced: { type: 'boolean', description: 'Backup eligible: a synced passkey; false: bound to one device' },
        backed_up: { type: 'boolean', description: 'Backup state at the last sign-in or registration' },
        user_verified: { type: 'boolean', description: 'The authenticator verified the user at registration' },
        transports: { type: 'array', items: { type: 'string' }, description: 'WebAuthn transports' },
        attested: {
          type: 'boolean',
          description: "The registration's attestation verified to a root of the imported FIDO metadata",
        },
        metadata_status: {
          type: ['string', 'null'],
          description: "The imported FIDO metadata's latest status for the model; null when not listed",
        },
      },
    },
  },
} as const;

const orgIdParam = {
  type: 'string',
  pattern: '^[0-9]+$',
  description: 'Numeric organization id; anything else names no organization (404)',
  examples: ['1234'],
} as const;

const eppnQuery = {
  type: 'string',
  description: "eduPersonPrincipalName (user@realm), URL-encoded; the realm must be the organization's",
  examples: ['alice@example.org'],
} as const;

const passkeyExample = {
  id: 4711,
  eppn: 'alice@example.org',
  label: 'Work laptop',
  created_at: '2024-01-15T10:30:00+00:00',
  last_used_at: '2024-03-02T08:12:45+00:00',
  mfa_verified: true,
  aaguid: 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4',
};

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    eppn: { ...eppnQuery, description: `${eppnQuery.description}. Without it the whole organization is listed` },
    per_page: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: 1000,
      description: 'Entries per page, 1-1000',
      examples: [100],
    },
    details: {
      type: 'string',
      enum: ['authenticator'],
      description:
        'authenticator: each passkey also carries an `authenticator` object (model name, synced or device-bound, attested, metadata status)',
    },
    offset: {
      type: 'string',
      description:
        'Opaque continuation token from the Link header; valid for PAGINATION_TOKEN_TTL seconds (default 300) and only for the request it continues',
      examples: ['AAAAAAAAAAAAAAAA.bm90LWEtcmVhbC10b2tlbg'],
    },
  },
} as const;

const errors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [
      s,
      { ...errorBody, description: ERROR_MEANING[s], examples: [{ code: s, message: ERROR_EXAMPLE[s] }] },
    ]),
  );

const ERROR_EXAMPLE: Record<number, string> = {
  400: "Invalid 'per_page' query parameter -- must be an integer from 1 to 1000",
  401: 'Token missing or invalid',
  403: 'Client not authorized for organization',
  404: 'Organization does not exist',
};

const ERROR_MEANING: Record<number, string> = {
  400: 'Invalid query parameter (eppn without @, eppn missing on DELETE, per_page outside 1-1000, malformed, altered, expired or misused offset, details other than authenticator, unknown or repeated parameter)',
  401: 'Token missing or invalid',
  403: 'Token lacks a required scope; client not authorized for the organization; eppn realm differs from the organization',
  404: 'Organization or passkey does not exist',
};

const readSecurity = [{ oauth2: ['passkey.read'] }];
const deleteSecurity = [{ oauth2: ['passkey.delete'] }];
const tags = ['passkey'];

export const listSchema = {
  operationId: 'listPasskeys',
  tags,
  security: readSecurity,
  summary: 'List passkeys of a user (with eppn) or of the whole organization',
  description:
    'Scope passkey.read. Paginated by keyset on id: when more entries exist, the Link header carries the next page URL (rel="next"); the last page has none.',
  params: { type: 'object', required: ['org_id'], properties: { org_id: orgIdParam } },
  querystring: listQuery,
  response: {
    200: {
      description: 'Passkeys in ascending id order',
      headers: {
        link: {
          type: 'string',
          description: 'When more entries exist: <absolute URL of the next page>; rel="next". Absent on the last page',
        },
      },
      type: 'array',
      items: passkey,
      examples: [[passkeyExample]],
    },
    ...errors(400, 401, 403, 404),
  },
} as const;

export const deleteUserSchema = {
  operationId: 'deleteUserPasskeys',
  tags,
  security: deleteSecurity,
  summary: "Delete all of a user's passkeys",
  description:
    'Scope passkey.delete. eppn is required: an organization-wide delete does not exist. One transaction, with its audit event.',
  params: { type: 'object', required: ['org_id'], properties: { org_id: orgIdParam } },
  querystring: { type: 'object', additionalProperties: false, required: ['eppn'], properties: { eppn: eppnQuery } },
  response: {
    200: {
      description: 'The number of passkeys deleted (0 when the user has none or does not exist)',
      type: 'object',
      required: ['deleted_count', 'eppn'],
      properties: { deleted_count: { type: 'integer' }, eppn: { type: 'string' } },
      examples: [{ deleted_count: 2, eppn: 'alice@example.org' }],
    },
    ...errors(400, 401, 403, 404),
  },
} as const;

export const deleteOneSchema = {
  operationId: 'deletePasskey',
  tags,
  security: deleteSecurity,
  summary: 'Delete a single passkey',
  description: 'Scope passkey.delete. A passkey of another organization is reported as not existing.',
  params: {
    type: 'object',
    required: ['org_id', 'id'],
    properties: {
      org_id: orgIdParam,
      id: {
        type: 'string',
        pattern: '^[0-9]+$',
        description: 'The id field from the list endpoints',
        examples: ['4711'],
      },
    },
  },
  response: {
    200: {
      description: 'The passkey was deleted',
      type: 'object',
      required: ['deleted', 'id'],
      properties: { deleted: { type: 'boolean' }, id: { type: 'integer' } },
      examples: [{ deleted: true, id: 4711 }],
    },
    ...errors(400, 401, 403, 404),
  },
} as const;
