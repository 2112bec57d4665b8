// `ldap add|list|show|test|sync|remove`: an organization's LDAP directory (Active Directory,
// OpenLDAP) as the source of its users, and optionally of their passwords (docs/ldap.md). The
// service account's password is read from standard input, sealed, and never shown.
import { readFileSync } from 'node:fs';
import { badRequest } from '../../errors.ts';
import * as ldap from '../../directory/ldap-directories.ts';
import { probeLdapDirectory } from '../../ldap/probe.ts';
import { syncLdapDirectory, type SyncSummary } from '../../ldap/sync.ts';
import {
  by,
  durationOption,
  intOption,
  optional,
  readPassword,
  repeated,
  required,
  table,
  type ArgumentDef,
  type CommandDef,
} from '../command.ts';

const DIRECTORY_ID: ArgumentDef[] = [{ name: 'id', description: 'the directory id (ldap list)' }];

function directoryId(value: string | undefined): number {
  if (value === undefined) throw badRequest('id is required');
  return intOption(value, 'id');
}

function onOff(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== 'on' && value !== 'off') throw badRequest(`--${name} must be on or off`);
  return value === 'on';
}

function readCa(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw badRequest(`cannot read --ca-file '${path}'`);
  }
}

function described(v: ldap.LdapDirectoryView): string {
  const lines = Object.entries(v).map(
    ([k, value]) => `${k}: ${typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)}`,
  );
  return lines.join('\n');
}

function syncText(s: SyncSummary): string {
  const lines = [
    `${s.dry_run ? 'dry run (nothing written): ' : ''}${s.mode} sync of LDAP directory ${s.directory_id}: ` +
      `${s.entries} entries in ${(s.duration_ms / 1000).toFixed(1)} s`,
    `created ${s.created}, updated ${s.updated} (renamed ${s.renamed}), disabled ${s.disabled}, enabled ${s.enabled}, ` +
      `removed ${s.removed}, unchanged ${s.unchanged}, kept ${s.kept}, rejected ${s.rejected}`,
    ...(s.groups
      ? [
          `groups: ${s.groups.entries} entries; created ${s.groups.created}, updated ${s.groups.updated}, ` +
            `removed ${s.groups.removed}, unchanged ${s.groups.unchanged}, kept ${s.groups.kept}; ` +
            `${s.groups.unresolved} member value(s) name no user of this directory`,
        ]
      : []),
    ...s.rejections.map((r) => `  rejected ${r.dn}: ${r.error}`),
    ...s.warnings.map((w) => `warning: ${w}`),
  ];
  return lines.join('\n');
}

export const ldapCommands: CommandDef[] = [
  {
    group: 'ldap',
    name: 'add',
    summary: "connect an organization's LDAP directory (Active Directory, OpenLDAP) as the source of its users",
    options: {
      org: { type: 'string', value: '<org_id>', required: true, description: 'the organization it provides users for' },
      url: {
        type: 'string',
        value: '<ldaps://host[:port]>',
        required: true,
        description: 'ldaps://, or ldap:// with --starttls (plain ldap:// only to this host)',
      },
      starttls: { type: 'boolean', description: 'upgrade an ldap:// connection with StartTLS' },
      'ca-file': {
        type: 'string',
        value: '<pem>',
        description: "CA certificates the directory's certificate is verified against (default: the system's)",
      },
      'bind-dn': {
        type: 'string',
        value: '<dn>',
        required: true,
        description: 'the service account that reads the directory',
      },
      'bind-password-stdin': {
        type: 'boolean',
        required: 'the password is read from standard input, never from the command line',
        description: "read the service account's password from standard input",
      },
      'base-dn': { type: 'string', value: '<dn>', required: true, description: 'where the users are searched' },
      filter: {
        type: 'string',
        value: '<ldap filter>',
        description: 'which entries are users (default (objectClass=person))',
      },
      map: {
        type: 'string',
        multiple: true,
        value: '<column>=<ldap attribute>',
        description:
          'an import column from an LDAP attribute, e.g. eppn=userPrincipalName (default eppn=uid, name=cn, given_name=givenName, family_name=sn, display_name=displayName, email=mail)',
      },
      'groups-base-dn': {
        type: 'string',
        value: '<dn>',
        description: 'where the groups are: synced with their members after the users (docs/ldap.md)',
      },
      'sync-every': {
        type: 'string',
        value: '<duration>',
        description: 'sync periodically, e.g. 15m (default: only when asked)',
      },
      'on-missing': {
        type: 'string',
        value: 'disable|remove|keep',
        description: 'users whose entries are gone (default disable)',
      },
      'password-check': {
        type: 'string',
        value: 'on|off',
        description: "users without a password of their own sign in with the directory's (default off)",
      },
    },
    async run(ctx, v) {
      if (v['bind-password-stdin'] !== true) throw badRequest('--bind-password-stdin is required');
      const bindPassword = await readPassword(ctx);
      const every = optional(v, 'sync-every');
      const added = await ldap.addLdapDirectory(
        ctx.store,
        ctx.keys,
        {
          orgId: intOption(required(v, 'org'), 'org'),
          url: required(v, 'url'),
          starttls: v.starttls === true,
          caPem: readCa(optional(v, 'ca-file')),
          bindDn: required(v, 'bind-dn'),
          bindPassword,
          baseDn: required(v, 'base-dn'),
          filter: optional(v, 'filter'),
          map: repeated(v, 'map'),
          groupsBaseDn: optional(v, 'groups-base-dn'),
          syncEveryMs: every === undefined ? undefined : durationOption(every, 'sync-every'),
          onMissing: optional(v, 'on-missing'),
          passwordCheck: onOff(optional(v, 'password-check'), 'password-check'),
        },
        by(ctx),
      );
      return ctx.json
        ? added
        : `LDAP directory ${added.id} for organization ${added.org_id}: ${added.url}\n(ldap test ${added.id} checks it; ldap sync ${added.id} reads its users)`;
    },
  },
  {
    group: 'ldap',
    name: 'list',
    summary: 'the LDAP directories, of one organization or all',
    options: { org: { type: 'string', value: '<org_id>', description: 'only this organization' } },
    async run(ctx, v) {
      const org = optional(v, 'org');
      const list = await ldap.listLdapDirectories(ctx.store, org === undefined ? undefined : intOption(org, 'org'));
      if (ctx.json) return list;
      return table(list, [
        'id',
        'org_id',
        'url',
        'base_dn',
        'sync_every',
        'password_check',
        'last_sync_at',
        'last_sync_status',
      ]);
    },
  },
  {
    group: 'ldap',
    name: 'show',
    summary: 'one LDAP directory: its settings (never the bind password) and its last sync',
    args: DIRECTORY_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const view = ldap.directoryView(await ldap.loadLdapDirectory(ctx.store, directoryId(id)));
      return ctx.json ? view : described(view);
    },
  },
  {
    group: 'ldap',
    name: 'test',
    summary: 'connect and bind as the service account, and read a few users as a sync would (changes nothing)',
    args: DIRECTORY_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const result = await probeLdapDirectory(ctx.store, ctx.keys, directoryId(id));
      if (ctx.json) return result;
      return [
        `LDAP directory ${result.id}: connected (${result.transport}) and bound${result.active_directory ? '; Active Directory' : ''}`,
        ...result.sample.map((s) =>
          s.error
            ? `  ${s.dn}: ${s.error}`
            : `  ${s.dn} -> ${s.eppn} (${s.external_id})${s.disabled ? ' disabled' : ''}`,
        ),
      ].join('\n');
    },
  },
  {
    group: 'ldap',
    name: 'sync',
    summary: "read the directory's users into the organization now (incremental after the first run)",
    args: DIRECTORY_ID,
    options: {
      'dry-run': { type: 'boolean', description: 'read and compare everything, change nothing' },
      full: { type: 'boolean', description: 'read the whole directory (finds users whose entries are gone)' },
    },
    async run(ctx, v, [id]) {
      const summary = await syncLdapDirectory(
        ctx.store,
        ctx.keys,
        directoryId(id),
        {
          dryRun: v['dry-run'] === true,
          full: v.full === true,
          onProgress: (p) => ctx.io.progress?.(`${p.entries} entries read, ${p.created} created, ${p.updated} updated`),
        },
        by(ctx),
      );
      if (summary.rejected > 0) ctx.exitCode = 1;
      return ctx.json ? summary : syncText(summary);
    },
  },
  {
    group: 'ldap',
    name: 'remove',
    summary: 'disconnect a directory: its users stay, no longer synced, and no longer sign in with its passwords',
    args: DIRECTORY_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const removed = await ldap.removeLdapDirectory(ctx.store, directoryId(id), by(ctx));
      return ctx.json
        ? { ...removed, removed: true }
        : `removed LDAP directory ${removed.id} (${removed.url}); its ${removed.users} user(s) stay`;
    },
  },
];
