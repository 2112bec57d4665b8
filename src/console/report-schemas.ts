// JSON schema of the organization report (/2/report): documents it in the OpenAPI document.
import { errorResponses, orgIdParams } from './schema-parts.ts';

const ERRORS: Record<number, string> = {
  400: 'unused_days not an integer from 1 to 3650; unknown or repeated parameter',
  401: 'Token missing or invalid',
  403: 'Token lacks report.read; client not authorized for the organization',
  404: 'Organization does not exist',
};

const count = (description: string) => ({ type: 'integer', description });

const funnel = {
  users: count('Users of the organization: imported, synchronized from the directory or provisioned'),
  invited: count('Users sent a link to make their first passkey'),
  signed_in: count('Users who signed in at least once'),
  with_passkey: count('Users with at least one passkey'),
  passkey_only: count('Users with a passkey and no password'),
};

export const reportSchema = {
  operationId: 'organizationReport',
  tags: ['report'],
  security: [{ oauth2: ['report.read'] }],
  summary: "The organization's passkey report",
  description:
    'Scope report.read. Users and passkey coverage, passkeys by authenticator model, synced or device-bound, without user verification, not used for unused_days days, users with no way to sign in; the adoption funnel (users, invited, signed in once, with a passkey, passkey-only) now and over the last 90 days.',
  params: orgIdParams,
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: {
      unused_days: { type: 'integer', minimum: 1, maximum: 3650, default: 180, examples: [180] },
    },
  },
  response: {
    200: {
      description: 'The report',
      type: 'object',
      properties: {
        org_id: { type: 'integer' },
        users: count('Users of the organization'),
        users_with_passkey: count('Users with at least one passkey'),
        coverage_percent: { type: 'number', description: 'users_with_passkey / users, in percent (one decimal)' },
        users_without_sign_in_method: count('Users with neither a password nor a passkey'),
        passkeys: count('Passkeys'),
        synced: count('Backup-eligible (synced) passkeys'),
        device_bound: count('Passkeys bound to one device'),
        without_user_verification: count('Passkeys registered without user verification'),
        unused_days: count('The period asked for'),
        unused: count('Passkeys not used (or, never used, made) in that period'),
        by_model: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              aaguid: { type: 'string' },
              name: { type: ['string', 'null'] },
              passkeys: { type: 'integer' },
            },
          },
        },
        adoption: {
          type: 'object',
          description: "The adoption funnel of the organization's move, now",
          properties: funnel,
        },
        adoption_history: {
          type: 'array',
          description:
            'The funnel as recorded on each of the last 90 days (UTC) that has a record, oldest first; the last item is today, now',
          items: {
            type: 'object',
            properties: { day: { type: 'string', format: 'date' }, ...funnel },
          },
        },
      },
      examples: [
        {
          org_id: 1234,
          users: 1200,
          users_with_passkey: 900,
          coverage_percent: 75,
          users_without_sign_in_method: 3,
          passkeys: 1500,
          synced: 1100,
          device_bound: 400,
          without_user_verification: 20,
          unused_days: 180,
          unused: 150,
          by_model: [
            { aaguid: 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4', name: 'Google Password Manager', passkeys: 800 },
          ],
          adoption: { users: 1200, invited: 1100, signed_in: 950, with_passkey: 900, passkey_only: 400 },
          adoption_history: [
            { day: '2026-11-27', users: 1200, invited: 1100, signed_in: 940, with_passkey: 890, passkey_only: 395 },
            { day: '2026-11-28', users: 1200, invited: 1100, signed_in: 950, with_passkey: 900, passkey_only: 400 },
          ],
        },
      ],
    },
    ...errorResponses(ERRORS),
  },
} as const;
