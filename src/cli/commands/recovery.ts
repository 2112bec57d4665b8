// `recovery create|list|revoke`: one-time links that let a user register a new passkey without
// signing in (a lost device, or an account without a password). The link is printed once.
import { badRequest } from '../../errors.ts';
import * as recovery from '../../webauthn/recovery-links.ts';
import { by, durationOption, intOption, optional, table, type CommandDef } from '../command.ts';

export const recoveryCommands: CommandDef[] = [
  {
    group: 'recovery',
    name: 'create',
    summary: 'make a one-time link that lets the user register a new passkey without signing in (shown once)',
    args: [{ name: 'eppn', description: 'the user (eduPersonPrincipalName, user@realm)' }],
    options: {
      ttl: {
        type: 'string',
        value: '<duration>',
        description: 'how long it works: 90m, 24h (default), 7d; at most 30d',
      },
      'delete-others': { type: 'boolean', description: "delete the user's other passkeys when the link is used" },
    },
    async run(ctx, v, [eppn]) {
      if (!eppn) throw badRequest('eppn is required');
      const ttl = optional(v, 'ttl');
      const link = await recovery.createRecoveryLink(
        ctx.store,
        ctx.config.publicUrl,
        {
          eppn,
          ttlMs: ttl === undefined ? undefined : durationOption(ttl, 'ttl'),
          deleteOthers: v['delete-others'] === true,
        },
        by(ctx),
      );
      if (ctx.json) return link;
      return [
        `recovery link ${link.id} for ${link.eppn}, works once until ${link.expires_at}:`,
        link.url,
        'It is shown only now; hand it to the user in person or read it to them.',
      ].join('\n');
    },
  },
  {
    group: 'recovery',
    name: 'list',
    summary: "list recovery links (never the links themselves): a user's, or an organization's",
    options: {
      eppn: { type: 'string', value: '<eppn>', description: 'this user’s links' },
      org: { type: 'string', value: '<id>', description: "the organization's links" },
    },
    async run(ctx, v) {
      const eppn = optional(v, 'eppn');
      const org = optional(v, 'org');
      if (eppn === undefined && org === undefined) throw badRequest('give --eppn or --org');
      const links = await recovery.recoveryLinks(ctx.store, {
        eppn,
        orgId: org === undefined ? undefined : intOption(org, 'org'),
      });
      return ctx.json ? links : table(links, ['id', 'eppn', 'state', 'created_at', 'expires_at', 'created_by']);
    },
  },
  {
    group: 'recovery',
    name: 'revoke',
    summary: 'revoke a recovery link that has not been used',
    args: [{ name: 'id', description: 'the link id (recovery list)' }],
    options: {},
    async run(ctx, _v, [id]) {
      if (id === undefined) throw badRequest('id is required');
      const linkId = intOption(id, 'id');
      await recovery.revokeLink(ctx.store, linkId, by(ctx));
      return ctx.json ? { id: linkId, revoked: true } : `recovery link ${linkId} revoked`;
    },
  },
];
