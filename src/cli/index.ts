// The admin CLI: `npm run idp -- <command>`. Human output by default, --json for scripts.
// Every failure is one line on stderr and a non-zero exit; nothing is changed.
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { keyring, loadSecret, type Keyring } from '../crypto.ts';
import { openStore, type Store } from '../store/index.ts';
import { AppError, badRequest } from '../errors.ts';
import { addOrganization, addSecondaryId, addUser, normalizeEppn, removeSecondaryId, setPassword } from '../directory/index.ts';
import * as dir from '../store/directory.ts';
import * as clients from '../clients/index.ts';
import { importPasskeys } from '../webauthn/import.ts';
import { listOrganizationPasskeys, listUserPasskeys } from '../store/passkeys.ts';
import { listAuditEvents } from '../store/audit.ts';
import { rotateSigningKeys, ensureSigningKeys, assertSecretMatches } from '../oauth/keys.ts';
import { keyTiming } from '../oauth/key-manager.ts';
import { iso } from '../time.ts';
import { removePhotoCommand, setPhotoCommand } from '../userinfo/cli.ts';

export interface Io {
  out(line: string): void;
  err(line: string): void;
  readStdin(): Promise<string>;
}

interface Ctx {
  config: Config;
  store: Store;
  keys: Keyring;
  json: boolean;
  io: Io;
}

type Options = NonNullable<ParseArgsConfig['options']>;
interface Command {
  usage: string;
  options: Options;
  run(ctx: Ctx, values: Record<string, any>, positionals: string[]): Promise<unknown>;
}

const JSON_OPT = { json: { type: 'boolean' } } as const;

function intOption(value: unknown, name: string): number {
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value) || Number(value) < 1) throw badRequest(`--${name} must be a positive integer (at most 15 digits)`);
  return Number(value);
}

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw badRequest(`--${name} is required`);
  return v;
}

function orgList(value: unknown): number[] {
  if (value === undefined) return [];
  return clients.parseList(String(value)).map((v) => intOption(v, 'orgs'));
}

/** At least one id, each an existing organization: a typo must fail, not silently grant or revoke nothing. */
async function existingOrgs(ctx: Ctx, value: string): Promise<number[]> {
  const ids = orgList(value);
  if (ids.length === 0) throw badRequest('--orgs needs at least one organization id');
  for (const id of ids) if (!(await dir.findOrganization(ctx.store.db, id))) throw badRequest(`organization ${id} does not exist`);
  return ids;
}

function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) => columns.map((c) => (r[c] === null || r[c] === undefined ? '-' : String(r[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(columns), ...cells.map(line)].join('\n');
}

async function readPassword(ctx: Ctx): Promise<string> {
  const text = await ctx.io.readStdin();
  const password = text.replace(/\r?\n$/, '');
  if (!password) throw badRequest('no password on standard input');
  return password;
}

function clientView(c: clients.Client) {
  return {
    client_id: c.clientId,
    name: c.name,
    type: c.public ? 'public' : 'confidential',
    grant_types: c.grantTypes,
    scopes: c.scopes,
    groups: c.groups,
    organizations: c.adminOrgs,
    checkuser_organizations: c.checkuserOrgs,
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.postLogoutRedirectUris,
    first_party: c.firstParty,
    userinfo_signed_response_alg: c.userinfoSignedResponseAlg,
    created_at: iso(c.createdAt),
  };
}

function showClient(ctx: Ctx, c: clients.Client, secret?: string | null) {
  const view = { ...clientView(c), ...(secret ? { client_secret: secret } : {}) };
  if (ctx.json) return view;
  const lines = Object.entries(view).map(([k, v]) => `${k.padEnd(28)} ${Array.isArray(v) ? v.join(' ') || '-' : v ?? '-'}`);
  if (secret) lines.push('', 'The client secret is shown only now; store it safely.');
  return lines.join('\n');
}

const commands: Record<string, Command> = {
  'org add': {
    usage: 'org add --id <n> --realm <realm> --name <name>',
    options: { id: { type: 'string' }, realm: { type: 'string' }, name: { type: 'string' } },
    async run(ctx, v) {
      const org = await addOrganization(ctx.store, { id: intOption(required(v, 'id'), 'id'), realm: required(v, 'realm'), name: required(v, 'name') });
      return ctx.json ? { ...org, created_at: iso(org.created_at) } : `organization ${org.id} (${org.realm}) added`;
    },
  },
  'org list': {
    usage: 'org list',
    options: {},
    async run(ctx) {
      const orgs = (await dir.listOrganizations(ctx.store.db)).map((o) => ({ ...o, created_at: iso(o.created_at) }));
      return ctx.json ? orgs : table(orgs, ['id', 'realm', 'name', 'created_at']);
    },
  },
  'user add': {
    usage: 'user add --org <id> --eppn <eppn> --name <name> [--email <email>] [--nin <number>] [--password-stdin]',
    options: { org: { type: 'string' }, eppn: { type: 'string' }, name: { type: 'string' }, email: { type: 'string' }, nin: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
    async run(ctx, v) {
      const password = v['password-stdin'] ? await readPassword(ctx) : undefined;
      const user = await addUser(ctx.store, {
        orgId: intOption(required(v, 'org'), 'org'),
        eppn: required(v, 'eppn'),
        name: required(v, 'name'),
        email: v.email,
        nin: v.nin,
        password,
      });
      const view = { sub: user.sub, org_id: user.org_id, eppn: user.eppn, name: user.name, email: user.email, has_password: user.password_hash !== null };
      return ctx.json ? view : `user ${user.eppn} added (sub ${user.sub})`;
    },
  },
  'user list': {
    usage: 'user list --org <id>',
    options: { org: { type: 'string' } },
    async run(ctx, v) {
      const users = await dir.listUsersOfOrganization(ctx.store.db, intOption(required(v, 'org'), 'org'));
      const rows = users.map((u) => ({ sub: u.sub, eppn: u.eppn, name: u.name, email: u.email, password: u.password_hash ? 'yes' : 'no', created_at: iso(u.created_at) }));
      return ctx.json ? rows : table(rows, ['eppn', 'name', 'email', 'password', 'sub', 'created_at']);
    },
  },
  'user set-password': {
    usage: 'user set-password --eppn <eppn> --password-stdin',
    options: { eppn: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
    async run(ctx, v) {
      const eppn = required(v, 'eppn');
      if (!v['password-stdin']) throw badRequest('--password-stdin is required (passwords are never taken from the command line)');
      await setPassword(ctx.store, eppn, await readPassword(ctx));
      return ctx.json ? { eppn: normalizeEppn(eppn), password_set: true } : `password set for ${normalizeEppn(eppn)}`;
    },
  },
  'user set-photo': setPhotoCommand,
  'user remove-photo': removePhotoCommand,
  'user add-id': {
    usage: 'user add-id --eppn <eppn> --id <namespace>:<identifier>   (edugain, eidas, facebook, google, ...)',
    options: { eppn: { type: 'string' }, id: { type: 'string' } },
    async run(ctx, v) {
      const added = await addSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'));
      return ctx.json ? added : `${added.id} added to ${added.eppn}`;
    },
  },
  'user remove-id': {
    usage: 'user remove-id --eppn <eppn> --id <namespace>:<identifier>',
    options: { eppn: { type: 'string' }, id: { type: 'string' } },
    async run(ctx, v) {
      await removeSecondaryId(ctx.store, required(v, 'eppn'), required(v, 'id'));
      return ctx.json ? { removed: true } : 'removed';
    },
  },
  'client add': {
    usage:
      'client add --name <name> [--scopes "..."] [--groups "..."] [--orgs <id,...>] [--redirect-uri <uri> ...] [--post-logout-redirect-uri <uri> ...] [--first-party] [--public] [--userinfo-signed-alg RS256|ES256]',
    options: {
      name: { type: 'string' },
      scopes: { type: 'string' },
      groups: { type: 'string' },
      orgs: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      'post-logout-redirect-uri': { type: 'string', multiple: true },
      'first-party': { type: 'boolean' },
      public: { type: 'boolean' },
      'userinfo-signed-alg': { type: 'string' },
    },
    async run(ctx, v) {
      const { client, secret } = await clients.createClient(ctx.store, ctx.keys, {
        name: required(v, 'name'),
        scopes: clients.parseList(v.scopes),
        groups: clients.parseList(v.groups),
        orgs: orgList(v.orgs),
        redirectUris: v['redirect-uri'],
        postLogoutRedirectUris: v['post-logout-redirect-uri'],
        firstParty: v['first-party'],
        public: v.public,
        userinfoSignedResponseAlg: v['userinfo-signed-alg'],
      });
      return showClient(ctx, client, secret);
    },
  },
  'client list': {
    usage: 'client list',
    options: {},
    async run(ctx) {
      const all = (await clients.listClients(ctx.store)).map(clientView);
      if (ctx.json) return all;
      return table(
        all.map((c) => ({ ...c, scopes: c.scopes.join(' '), groups: c.groups.join(' '), organizations: c.organizations.join(',') })),
        ['client_id', 'name', 'type', 'scopes', 'groups', 'organizations'],
      );
    },
  },
  'client show': {
    usage: 'client show <client_id>',
    options: {},
    async run(ctx, _v, [id]) {
      if (!id) throw badRequest('client id is required');
      return showClient(ctx, await clients.getClient(ctx.store, id));
    },
  },
  'client rotate-secret': {
    usage: 'client rotate-secret <client_id>',
    options: {},
    async run(ctx, _v, [id]) {
      if (!id) throw badRequest('client id is required');
      const secret = await clients.rotateSecret(ctx.store, ctx.keys, id);
      return ctx.json ? { client_id: id, client_secret: secret } : `new secret for ${id}: ${secret}\nThe old secret no longer works. This secret is shown only now.`;
    },
  },
  'client set-groups': {
    usage: 'client set-groups <client_id> --groups "..."',
    options: { groups: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      if (typeof v.groups !== 'string') throw badRequest('--groups is required (use --groups "" to remove all)');
      return showClient(ctx, await clients.setGroups(ctx.store, id, clients.parseList(v.groups)));
    },
  },
  'client set-scopes': {
    usage: 'client set-scopes <client_id> --scopes "..."',
    options: { scopes: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      if (typeof v.scopes !== 'string') throw badRequest('--scopes is required');
      return showClient(ctx, await clients.setScopes(ctx.store, id, clients.parseList(v.scopes)));
    },
  },
  'client grant-orgs': {
    usage: 'client grant-orgs <client_id> --orgs <id,...>',
    options: { orgs: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      return showClient(ctx, await clients.grantOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'admin'));
    },
  },
  'client revoke-orgs': {
    usage: 'client revoke-orgs <client_id> --orgs <id,...>',
    options: { orgs: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      return showClient(ctx, await clients.revokeOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'admin'));
    },
  },
  'client grant-checkuser': {
    usage: 'client grant-checkuser <client_id> --orgs <id,...>',
    options: { orgs: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      return showClient(ctx, await clients.grantOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'checkuser'));
    },
  },
  'client revoke-checkuser': {
    usage: 'client revoke-checkuser <client_id> --orgs <id,...>',
    options: { orgs: { type: 'string' } },
    async run(ctx, v, [id]) {
      if (!id) throw badRequest('client id is required');
      return showClient(ctx, await clients.revokeOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'checkuser'));
    },
  },
  'passkey import': {
    usage: 'passkey import --file <json>',
    options: { file: { type: 'string' } },
    async run(ctx, v) {
      const path = required(v, 'file');
      let data: unknown;
      try {
        data = JSON.parse(readFileSync(path, 'utf8'));
      } catch (err) {
        throw badRequest(`${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : 'not valid JSON'}`);
      }
      const result = await importPasskeys(ctx.store, data);
      return ctx.json ? result : `imported ${result.imported} passkeys`;
    },
  },
  'passkey list': {
    usage: 'passkey list --org <id> [--eppn <eppn>]',
    options: { org: { type: 'string' }, eppn: { type: 'string' } },
    async run(ctx, v) {
      const orgId = intOption(required(v, 'org'), 'org');
      const org = await dir.findOrganization(ctx.store.db, orgId);
      if (!org) throw badRequest(`organization ${orgId} does not exist`);
      let rows;
      if (v.eppn !== undefined) {
        const user = await dir.findUserByEppn(ctx.store.db, normalizeEppn(v.eppn));
        if (!user || user.org_id !== orgId) throw badRequest(`user '${v.eppn}' does not exist in organization ${orgId}`);
        rows = await listUserPasskeys(ctx.store.db, user.id, 0, Number.MAX_SAFE_INTEGER);
      } else {
        rows = await listOrganizationPasskeys(ctx.store.db, orgId, 0, Number.MAX_SAFE_INTEGER);
      }
      const view = rows.map((r) => ({ id: r.id, eppn: r.eppn, label: r.label, created_at: iso(r.created_at), last_used_at: r.last_used_at === null ? null : iso(r.last_used_at), mfa_verified: r.mfa_verified === 1, aaguid: r.aaguid }));
      return ctx.json ? view : table(view, ['id', 'eppn', 'label', 'created_at', 'last_used_at', 'mfa_verified', 'aaguid']);
    },
  },
  'keys rotate': {
    usage: 'keys rotate',
    options: {},
    async run(ctx) {
      await ensureSigningKeys(ctx.store, ctx.keys);
      const added = await rotateSigningKeys(ctx.store, ctx.keys, keyTiming(ctx.config));
      const view = added.map((k) => ({ kid: k.kid, alg: k.alg, activates_at: iso(k.activatesAt) }));
      return ctx.json ? view : `${view.map((k) => `new ${k.alg} key ${k.kid}, signs from ${k.activates_at}`).join('\n')}\nThe previous keys stay in the JWKS until tokens they signed have expired.`;
    },
  },
  'audit list': {
    usage: 'audit list [--org <id>] [--since <ISO 8601 time>] [--limit <n>]',
    options: { org: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' } },
    async run(ctx, v) {
      let since: number | undefined;
      if (v.since !== undefined) {
        since = Date.parse(v.since);
        if (Number.isNaN(since)) throw badRequest(`--since '${v.since}' is not a date or ISO 8601 time`);
      }
      const rows = await listAuditEvents(ctx.store.db, {
        orgId: v.org === undefined ? undefined : intOption(v.org, 'org'),
        since,
        limit: v.limit === undefined ? 1000 : intOption(v.limit, 'limit'),
      });
      const view = rows.map((r) => ({
        id: r.id,
        at: iso(r.at),
        kind: r.kind,
        client_id: r.client_id,
        org_id: r.org_id,
        eppn: r.eppn,
        passkey_ids: JSON.parse(r.passkey_ids) as number[],
        request_id: r.request_id,
        details: JSON.parse(r.details),
      }));
      if (ctx.json) return view;
      return table(view.map((r) => ({ ...r, passkey_ids: r.passkey_ids.join(','), details: JSON.stringify(r.details) })), ['id', 'at', 'kind', 'client_id', 'org_id', 'eppn', 'passkey_ids', 'request_id']);
    },
  },
};

export type { Command, Ctx };

function usage(): string {
  return ['usage: npm run idp -- <command> [--json]', '', 'commands:', ...Object.values(commands).map((c) => `  ${c.usage}`), '  serve   (start the service)'].join('\n');
}

export async function runCli(argv: string[], io: Io, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const name = argv.slice(0, 2).join(' ');
  const command = commands[name];
  if (!command) {
    if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help') {
      io.out(usage());
      return 0;
    }
    io.err(`error: unknown command '${argv.slice(0, 2).join(' ')}' (see npm run idp -- help)`);
    return 2;
  }
  let values: Record<string, any>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv.slice(2), options: { ...command.options, ...JSON_OPT }, allowPositionals: true, strict: true }));
  } catch (err) {
    io.err(`error: ${(err as Error).message.split('\n')[0]} (usage: ${command.usage})`);
    return 2;
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      io.err(`configuration error: ${err.message}`);
      return 2;
    }
    throw err;
  }
  let store: Store | undefined;
  try {
    const keys = keyring(loadSecret(config, { generate: false }).secret);
    store = await openStore(config.databaseUrl, { poolSize: 2 });
    await assertSecretMatches(store, keys);
    const result = await command.run({ config, store, keys, json: Boolean(values.json), io }, values, positionals);
    if (result !== undefined) io.out(typeof result === 'string' ? result : JSON.stringify(result, null, 2));
    return 0;
  } catch (err) {
    if (err instanceof AppError) {
      io.err(`error: ${err.message}`);
      return 1;
    }
    io.err(`error: ${(err as Error).message?.split('\n')[0] ?? String(err)}`);
    return 1;
  } finally {
    await store?.close();
  }
}
