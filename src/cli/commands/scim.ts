// `scim token create|list|revoke`: an organization's provisioning tokens for SCIM (/scim/v2), the
// credential Entra ID and Okta are given. A token is printed once; the service keeps its hash.
import { badRequest } from '../../errors.ts';
import * as provisioning from '../../directory/provisioning.ts';
import { by, intOption, optional, required, table, type CommandDef } from '../command.ts';

export const scimCommands: CommandDef[] = [
  {
    group: 'scim',
    name: 'token create',
    summary: "make a provisioning token for an organization's SCIM client (shown once)",
    options: {
      org: { type: 'string', value: '<id>', required: true, description: 'the organization the token provisions' },
      name: { type: 'string', value: '<label>', description: 'what the token is for, e.g. "Entra ID" (default SCIM)' },
    },
    async run(ctx, v) {
      const org = required(v, 'org');
      const made = await provisioning.createScimToken(ctx.store, intOption(org, 'org'), optional(v, 'name'), by(ctx));
      if (ctx.json) return made;
      return [
        `provisioning token ${made.id} for organization ${org}:`,
        made.token,
        `It is shown only now. SCIM base URL: ${ctx.config.publicUrl}/scim/v2`,
      ].join('\n');
    },
  },
  {
    group: 'scim',
    name: 'token list',
    summary: "list an organization's provisioning tokens (never the tokens themselves)",
    options: { org: { type: 'string', value: '<id>', required: true, description: 'the organization' } },
    async run(ctx, v) {
      const org = required(v, 'org');
      const tokens = await provisioning.listScimTokens(ctx.store, intOption(org, 'org'));
      return ctx.json
        ? tokens
        : table(tokens, ['id', 'name', 'created_at', 'created_by', 'last_used_at', 'revoked_at']);
    },
  },
  {
    group: 'scim',
    name: 'token revoke',
    summary: 'revoke a provisioning token: it stops working at once',
    args: [{ name: 'id', description: 'the token id (scim token list)' }],
    options: {},
    async run(ctx, _v, [id]) {
      if (id === undefined) throw badRequest('id is required');
      const tokenId = intOption(id, 'id');
      await provisioning.revokeScimToken(ctx.store, tokenId, by(ctx));
      return ctx.json ? { id: tokenId, revoked: true } : `provisioning token ${tokenId} revoked`;
    },
  },
];
