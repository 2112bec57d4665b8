// `user` commands: users, their passwords and secondary ids (photos are in photo.ts).
import {
  addSecondaryId,
  addUser,
  normalizeEppn,
  removeSecondaryId,
  setPassword,
  setUserAttributes,
  type User,
} from '../../directory/index.ts';
import { disableUser, enableUser, removeUser } from '../../oauth/account-lifecycle.ts';
import { listUsersOfOrganization } from '../../store/directory.ts';
import { iso } from '../../time.ts';
import { by, intOption, optional, readPassword, required, table, type CommandDef } from '../command.ts';

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

const USER = [{ name: 'eppn', description: 'the user (eduPersonPrincipalName, user@realm)' }];

function userView(user: User) {
  return {
    sub: user.sub,
    org_id: user.org_id,
    eppn: user.eppn,
    name: user.name,
    display_name: user.display_name,
    email: user.email,
    email_verified: user.email_verified === 1,
    disabled: user.disabled_at !== null,
    has_password: user.password_hash !== null,
  };
}

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
      const user = await addUser(
        ctx.store,
        {
          orgId: intOption(required(v, 'org'), 'org'),
          eppn: required(v, 'eppn'),
          name: required(v, 'name'),
          email: optional(v, 'email'),
          nin: optional(v, 'nin'),
          password,
        },
        by(ctx),
      );
      return ctx.json ? userView(user) : `user ${user.eppn} added (sub ${user.sub})`;
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
        has_password: u.password_hash !== null,
        status: u.disabled_at === null ? 'active' : 'disabled',
        created_at: iso(u.created_at),
      }));
      if (ctx.json) return rows;
      const shown = rows.map((r) => ({ ...r, password: r.has_password ? 'yes' : 'no' }));
      return table(shown, ['eppn', 'name', 'email', 'password', 'status', 'sub', 'created_at']);
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
      await setPassword(ctx.store, eppn, await readPassword(ctx), by(ctx));
      return ctx.json ? { eppn: normalizeEppn(eppn), password_set: true } : `password set for ${normalizeEppn(eppn)}`;
    },
  },
  {
    group: 'user',
    name: 'add-id',
    summary: 'add a secondary id, released in userid_sec and searchable by the user-existence API',
    options: { eppn: EPPN, id: SECONDARY_ID },
    async run(ctx, v) {
      const added = await addSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'), by(ctx));
      return ctx.json ? added : `${added.id} added to ${added.eppn}`;
    },
  },
  {
    group: 'user',
    name: 'remove-id',
    summary: 'remove a secondary id',
    options: { eppn: EPPN, id: SECONDARY_ID },
    async run(ctx, v) {
      await removeSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'), by(ctx));
      return ctx.json ? { removed: true } : 'removed';
    },
  },
  {
    group: 'user',
    name: 'set',
    summary: "change a user's name, display name or e-mail; userinfo and new ID tokens carry the change",
    args: USER,
    options: {
      name: { type: 'string', value: '<name>', description: 'name (the name claim)' },
      'display-name': {
        type: 'string',
        value: '<name>',
        description: 'how pages and authenticators show the user; "" clears it (the name is shown)',
      },
      email: {
        type: 'string',
        value: '<email>',
        description: 'e-mail address; "" removes it; a new address is unverified',
      },
      'email-verified': {
        type: 'boolean',
        description: 'the organization verified the address: email_verified becomes true',
      },
    },
    async run(ctx, v, [eppn]) {
      const user = await setUserAttributes(
        ctx.store,
        eppn!,
        {
          name: optional(v, 'name'),
          displayName: optional(v, 'display-name'),
          email: optional(v, 'email'),
          emailVerified: v['email-verified'] === true ? true : undefined,
        },
        by(ctx),
      );
      return ctx.json ? userView(user) : `user ${user.eppn} changed`;
    },
  },
  {
    group: 'user',
    name: 'disable',
    summary: 'refuse sign-in, end sessions, revoke grants and tokens (passkeys, password and photo are kept)',
    args: USER,
    options: {},
    async run(ctx, _v, [eppn]) {
      const r = await disableUser(ctx.store, eppn!, by(ctx));
      if (ctx.json) return { eppn: r.eppn, disabled: true, changed: r.changed, sessions_ended: r.sessions };
      return r.changed
        ? `user ${r.eppn} disabled; ${r.sessions} session(s) ended, grants and tokens revoked`
        : `user ${r.eppn} was already disabled`;
    },
  },
  {
    group: 'user',
    name: 'enable',
    summary: 'allow a disabled user to sign in again',
    args: USER,
    options: {},
    async run(ctx, _v, [eppn]) {
      const r = await enableUser(ctx.store, eppn!, by(ctx));
      if (ctx.json) return { eppn: r.eppn, disabled: false, changed: r.changed };
      return r.changed ? `user ${r.eppn} enabled` : `user ${r.eppn} was not disabled`;
    },
  },
  {
    group: 'user',
    name: 'remove',
    summary: 'delete a user with their passkeys, photo, consents, sessions, grants and tokens (the audit trail stays)',
    args: USER,
    options: {},
    async run(ctx, _v, [eppn]) {
      const r = await removeUser(ctx.store, eppn!, by(ctx));
      return ctx.json
        ? { eppn: r.eppn, removed: true, passkeys_deleted: r.passkeys }
        : `user ${r.eppn} removed with ${r.passkeys} passkey(s)`;
    },
  },
];
