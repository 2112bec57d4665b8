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
import { importUsers, type ImportSummary } from '../../directory/user-import.ts';
import { disableUser, enableUser, removeUser } from '../../oauth/account-lifecycle.ts';
import { findUserByEppn, listUserIds, listUsersOfOrganization } from '../../store/directory.ts';
import { linksOfUser } from '../../upstream/linking.ts';
import { notFound } from '../../errors.ts';
import { iso } from '../../time.ts';
import { by, intOption, optional, readPassword, required, table, type CommandDef, type Ctx } from '../command.ts';

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

/** A progress bar on a terminal's stderr, redrawn at most every 200 ms. */
function progressBar(ctx: Ctx) {
  let last = 0;
  return ({ lines, bytes, size }: { lines: number; bytes: number; size: number }) => {
    const now = Date.now();
    if (!ctx.io.progress || (now - last < 200 && bytes < size)) return;
    last = now;
    const share = size === 0 ? 1 : Math.min(1, bytes / size);
    const filled = Math.round(share * 30);
    ctx.io.progress(
      `[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${Math.floor(share * 100)}% ${lines.toLocaleString('en')} lines`,
    );
  };
}

const SHOWN_REJECTIONS = 50;

function importText(s: ImportSummary): string {
  const lines = [
    `created ${s.created}, updated ${s.updated}${s.renamed ? ` (${s.renamed} renamed)` : ''}, unchanged ${s.unchanged}, rejected ${s.rejected}${s.passwords ? `; ${s.passwords} password hash(es) set` : ''}`,
    ...s.rejections.slice(0, SHOWN_REJECTIONS).map((r) => `line ${r.line}: ${r.error}`),
  ];
  if (s.rejections.length > SHOWN_REJECTIONS)
    lines.push(`... and ${s.rejections.length - SHOWN_REJECTIONS} more (--json lists them all)`);
  if (s.dry_run) lines.push('dry run: nothing was written');
  else if (!s.written) lines.push('transactional: a line was rejected, so nothing was written');
  return lines.join('\n');
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
        active: u.disabled_at === null,
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
    name: 'import',
    summary:
      'create and update users from a CSV or JSON lines file, by eppn or external_id; exit 1 when a line is rejected (docs/user-import.md)',
    args: [{ name: 'file', description: 'a .csv file with a header line, or a .jsonl file (one JSON object a line)' }],
    options: {
      org: { type: 'string', value: '<id>', required: true, description: 'organization id' },
      'dry-run': { type: 'boolean', description: 'check every line and report what would happen; write nothing' },
      transactional: {
        type: 'boolean',
        description: 'all or nothing: write nothing if any line is rejected (default: good lines are written)',
      },
    },
    async run(ctx, v, [file]) {
      const started = performance.now();
      const summary = await importUsers(
        ctx.store,
        {
          orgId: intOption(required(v, 'org'), 'org'),
          file: file!,
          dryRun: v['dry-run'] === true,
          transactional: v.transactional === true,
          onProgress: progressBar(ctx),
        },
        by(ctx),
      );
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const read = summary.created + summary.updated + summary.unchanged + summary.rejected;
      if (ctx.io.progress) ctx.io.progress(`${read.toLocaleString('en')} lines in ${seconds} s\n`);
      else if (!ctx.json) ctx.io.err(`${read.toLocaleString('en')} lines in ${seconds} s`);
      if (summary.rejected > 0) ctx.exitCode = 1;
      return ctx.json ? summary : importText(summary);
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
    name: 'show',
    summary: 'one user: attributes, secondary ids, passkey count and links to upstream identity providers',
    args: USER,
    options: {},
    async run(ctx, _v, [eppn]) {
      const user = await findUserByEppn(ctx.store.db, normalizeEppn(eppn ?? ''));
      if (!user) throw notFound(`user '${eppn ?? ''}' does not exist`);
      const ids = await listUserIds(ctx.store.db, user.id);
      const links = await linksOfUser(ctx.store, user.id);
      const view = {
        ...userView(user),
        given_name: user.given_name,
        family_name: user.family_name,
        external_id: user.external_id,
        affiliation: user.affiliation,
        created_at: iso(user.created_at),
        secondary_ids: ids.map((i) => `${i.namespace}:${i.identifier}`),
        passkeys: Number(user.passkey_count),
        links,
      };
      if (ctx.json) return view;
      const lines = Object.entries(view)
        .filter(([k]) => k !== 'links')
        .map(([k, value]) => `${k}: ${Array.isArray(value) ? (value as string[]).join(', ') : String(value)}`);
      for (const l of links) lines.push(`link: ${l.name} (${l.upstream}) ${l.subject}`);
      return lines.join('\n');
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
