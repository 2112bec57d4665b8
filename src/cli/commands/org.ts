// `org` commands: organizations (realm = the part after @ in their users' eppn).
import { addOrganization } from '../../directory/index.ts';
import { listOrganizations } from '../../store/directory.ts';
import { iso } from '../../time.ts';
import { intOption, required, table, type CommandDef } from '../command.ts';

export const orgCommands: CommandDef[] = [
  {
    group: 'org',
    name: 'add',
    summary: "add an organization (realm = the part after @ in its users' eppn)",
    options: {
      id: {
        type: 'string',
        value: '<n>',
        required: true,
        description: 'numeric organization id, the org_id of the passkey API',
      },
      realm: {
        type: 'string',
        value: '<realm>',
        required: true,
        description: "domain after @ in the users' eppn, e.g. example.org",
      },
      name: { type: 'string', value: '<name>', required: true, description: 'display name' },
    },
    async run(ctx, v) {
      const org = await addOrganization(ctx.store, {
        id: intOption(required(v, 'id'), 'id'),
        realm: required(v, 'realm'),
        name: required(v, 'name'),
      });
      return ctx.json ? { ...org, created_at: iso(org.created_at) } : `organization ${org.id} (${org.realm}) added`;
    },
  },
  {
    group: 'org',
    name: 'list',
    summary: 'list organizations',
    options: {},
    async run(ctx) {
      const orgs = (await listOrganizations(ctx.store.db)).map((o) => ({ ...o, created_at: iso(o.created_at) }));
      return ctx.json ? orgs : table(orgs, ['id', 'realm', 'name', 'created_at']);
    },
  },
];
