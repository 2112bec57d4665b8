// `role grant|revoke|list`: staff roles. helpdesk and org-admin are granted in one organization
// (`--org`), operator across all of them (no `--org`, and only here).
import * as roles from '../../directory/roles.ts';
import { badRequest } from '../../errors.ts';
import { by, intOption, optional, table, type ArgumentDef, type CommandDef, type Values } from '../command.ts';

const ARGS: ArgumentDef[] = [
  { name: 'eppn', description: 'the staff member (a user of the organization)' },
  { name: 'role', description: 'helpdesk, org-admin or operator' },
];

const ORG = {
  type: 'string',
  value: '<org_id>',
  description: 'the organization (helpdesk, org-admin); none for operator',
} as const;

function change(v: Values, [eppn, role]: (string | undefined)[]) {
  if (!eppn) throw badRequest('eppn is required');
  if (!role) throw badRequest('role is required');
  const org = optional(v, 'org');
  return { eppn, role: roles.parseRole(role), orgId: org === undefined ? undefined : intOption(org, 'org') };
}

const said = (r: { eppn: string; role: string; org_id: number | null }) =>
  r.org_id === null ? `${r.role} for ${r.eppn}` : `${r.role} for ${r.eppn} in organization ${r.org_id}`;

export const roleCommands: CommandDef[] = [
  {
    group: 'role',
    name: 'grant',
    summary: 'grant a staff role: helpdesk or org-admin in an organization, operator in all',
    args: ARGS,
    options: { org: ORG },
    async run(ctx, v, args) {
      const granted = await roles.grantRole(ctx.store, change(v, args), by(ctx));
      return ctx.json ? { ...granted, granted: true } : `granted ${said(granted)}`;
    },
  },
  {
    group: 'role',
    name: 'revoke',
    summary: 'revoke a staff role (same arguments as grant)',
    args: ARGS,
    options: { org: ORG },
    async run(ctx, v, args) {
      const revoked = await roles.revokeRole(ctx.store, change(v, args), by(ctx));
      return ctx.json ? { ...revoked, revoked: true } : `revoked ${said(revoked)}`;
    },
  },
  {
    group: 'role',
    name: 'list',
    summary: 'list staff roles, of one organization or all',
    options: { org: { type: 'string', value: '<org_id>', description: 'only this organization' } },
    async run(ctx, v) {
      const org = optional(v, 'org');
      const grants = await roles.roleGrants(ctx.store, org === undefined ? undefined : intOption(org, 'org'));
      if (ctx.json) return grants;
      return table(
        grants.map((g) => ({ ...g, org_id: g.org_id === null ? 'all' : String(g.org_id) })),
        ['eppn', 'role', 'org_id', 'granted_at', 'granted_by'],
      );
    },
  },
];
