// `user` commands: users, their passwords and secondary ids (photos are in photo.ts).
import { addSecondaryId, addUser, normalizeEppn, removeSecondaryId, setPassword } from '../../directory/index.ts';
import { listUsersOfOrganization } from '../../store/directory.ts';
import { iso } from '../../time.ts';
import { intOption, optional, readPassword, required, table, type CommandDef } from '../command.ts';

const EPPN = {
  type: 'string',
  value: '<eppn>',
  required: true,
  description: 'the user (eduPersonPrincipalName, user@realm)',
} as const;
const SECONDARY_ID = {
  type: 'string',
  value: '<namespace>:<identifier>',
  required: true,
  description: 'secondary id; namespaces edugain, eidas, facebook, google, ...',
} as const;

export const userCommands: CommandDef[] = [
  {
    group: 'user',
    name: 'add',
    summary: "add a user; the eppn realm must equal the organization's; eppn are stored lower-case",
    options: {
      org: { type: 'string', value: '<id>', required: true, description: 'organization id' },
      eppn: { ...EPPN, description: 'eduPersonPrincipalName, user@realm of the organization' },
      name: { type: 'string', value: '<name>', required: true, description: 'display name' },
      email: { type: 'string', value: '<email>', description: 'e-mail address' },
      nin: { type: 'string', value: '<number>', description: 'national identity number (11 digits)' },
      'password-stdin': { type: 'boolean', description: 'read a password from standard input' },
    },
    async run(ctx, v) {
      const password = v['password-stdin'] ? await readPassword(ctx) : undefined;
      const user = await addUser(ctx.store, {
        orgId: intOption(required(v, 'org'), 'org'),
        eppn: required(v, 'eppn'),
        name: required(v, 'name'),
        email: optional(v, 'email'),
        nin: optional(v, 'nin'),
        password,
      });
      const view = {
        sub: user.sub,
        org_id: user.org_id,
        eppn: user.eppn,
        name: user.name,
        email: user.email,
        has_password: user.password_hash !== null,
      };
      return ctx.json ? view : `user ${user.eppn} added (sub ${user.sub})`;
    },
  },
  {
    group: 'user',
    name: 'list',
    summary: "list an organization's users",
    options: { org: { type: 'string', value: '<id>', required: true, description: 'organization id' } },
    async run(ctx, v) {
      const users = await listUsersOfOrganization(ctx.store.db, intOption(required(v, 'org'), 'org'));
      const rows = users.map((u) => ({
        sub: u.sub,
        eppn: u.eppn,
        name: u.name,
        email: u.email,
        password: u.password_hash ? 'yes' : 'no',
        created_at: iso(u.created_at),
      }));
      return ctx.json ? rows : table(rows, ['eppn', 'name', 'email', 'password', 'sub', 'created_at']);
    },
  },
  {
    group: 'user',
    name: 'set-password',
    summary: 'set a password (read from standard input, never from the command line)',
    options: {
      eppn: EPPN,
      'password-stdin': {
        type: 'boolean',
        required: 'passwords are never taken from the command line',
        description: 'read the password from standard input',
      },
    },
    async run(ctx, v) {
      const eppn = required(v, 'eppn');
      await setPassword(ctx.store, eppn, await readPassword(ctx));
      return ctx.json ? { eppn: normalizeEppn(eppn), password_set: true } : `password set for ${normalizeEppn(eppn)}`;
    },
  },
  {
    group: 'user',
    name: 'add-id',
    summary: 'add a secondary id, released in userid_sec and searchable by the user-existence API',
    options: { eppn: EPPN, id: SECONDARY_ID },
    async run(ctx, v) {
      const added = await addSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'));
      return ctx.json ? added : `${added.id} added to ${added.eppn}`;
    },
  },
  {
    group: 'user',
    name: 'remove-id',
    summary: 'remove a secondary id',
    options: { eppn: EPPN, id: SECONDARY_ID },
    async run(ctx, v) {
      await removeSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'));
      return ctx.json ? { removed: true } : 'removed';
    },
  },
];
