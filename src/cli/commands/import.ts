// `import` commands: an organization brought over from another identity provider (docs/migrating.md).
// The export is read by src/directory/keycloak-export.ts; its users go through the user import
// (importUsers), disabled ones through disableUser, its clients through createClient: the same
// functions as `user import`, `user disable` and `client add`.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import * as clients from '../../clients/index.ts';
import { readKeycloakExport, type KeycloakRealm, type NotCarried } from '../../directory/keycloak-export.ts';
import { importUsers, type ImportSummary } from '../../directory/user-import.ts';
import { disableUser } from '../../oauth/account-lifecycle.ts';
import { findOrganization, findUserByEppn } from '../../store/directory.ts';
import { AppError, notFound } from '../../errors.ts';
import { normalizeEppn } from '../../directory/index.ts';
import { by, intOption, required, type CommandDef, type Ctx } from '../command.ts';

interface ClientOutcome {
  client_id: string;
  name: string;
  type: 'public' | 'confidential';
  redirect_uris: string[];
  /** added, would be added (dry run), or already there (left as it is) */
  status: 'added' | 'would add' | 'exists';
  /** a secret made here because the export had none: shown only now */
  new_secret?: string;
}

interface KeycloakReport {
  realm: string;
  dry_run: boolean;
  users: Omit<ImportSummary, 'rejections'> & { rejections: { line: number; username: string; error: string }[] };
  disabled: number;
  clients: ClientOutcome[];
  not_carried: NotCarried[];
}

/** The users as a JSON lines file for importUsers (mode 0600: it holds password hashes), removed after. */
async function importRealmUsers(ctx: Ctx, realm: KeycloakRealm, orgId: number, file: string, dryRun: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'idp-keycloak-'));
  const lines = join(dir, `${basename(file).replace(/\.json$/i, '')}.users.jsonl`);
  try {
    writeFileSync(lines, realm.users.map((u) => JSON.stringify(u.fields)).join('\n'), { mode: 0o600 });
    const summary = await importUsers(ctx.store, { orgId, file: lines, dryRun }, by(ctx));
    const rejections = summary.rejections.map((r) => ({ ...r, username: realm.users[r.line - 1]?.username ?? '?' }));
    return { ...summary, rejections };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Users Keycloak had disabled are disabled here too (a dry run counts them): only those of this
 * organization whose line the import took, never a user of another organization with that name.
 */
async function disableRealmUsers(
  ctx: Ctx,
  realm: KeycloakRealm,
  orgId: number,
  rejectedLines: Set<number>,
  dryRun: boolean,
): Promise<number> {
  let disabled = 0;
  for (const [i, u] of realm.users.entries()) {
    if (u.enabled || rejectedLines.has(i + 1)) continue;
    const eppn = normalizeEppn(String(u.fields.eppn));
    const user = await findUserByEppn(ctx.store.db, eppn);
    if (user && Number(user.org_id) !== orgId) continue;
    if (dryRun) disabled += !user || user.disabled_at === null ? 1 : 0;
    else if (user && (await disableUser(ctx.store, eppn, by(ctx))).changed) disabled++;
  }
  return disabled;
}

async function addRealmClients(ctx: Ctx, realm: KeycloakRealm, dryRun: boolean, out: NotCarried[]) {
  const outcomes: ClientOutcome[] = [];
  for (const { clientId, input } of realm.clients) {
    const view = {
      client_id: clientId,
      name: input.name,
      type: input.public ? ('public' as const) : ('confidential' as const),
      redirect_uris: input.redirectUris ?? [],
    };
    if (await clients.getClient(ctx.store, clientId).catch(() => undefined)) {
      outcomes.push({ ...view, status: 'exists' });
      continue;
    }
    if (dryRun) {
      outcomes.push({ ...view, status: 'would add' });
      continue;
    }
    try {
      const { secret } = await clients.createClient(ctx.store, ctx.keys, input, by(ctx));
      const made = secret !== null && secret !== input.secret ? { new_secret: secret } : {};
      outcomes.push({ ...view, status: 'added', ...made });
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      out.push({ kind: 'client', subject: clientId, detail: err.message });
    }
  }
  return outcomes;
}

function reportText(r: KeycloakReport): string {
  const u = r.users;
  const lines = [
    `realm ${r.realm}${r.dry_run ? ' (dry run: nothing was written)' : ''}`,
    `users: created ${u.created}, updated ${u.updated}, unchanged ${u.unchanged}, rejected ${u.rejected}; ${u.passwords} password hash(es) ${r.dry_run ? 'to set' : 'set'}; ${r.disabled} disabled`,
    ...u.rejections.map((x) => `  user ${x.username}: ${x.error}`),
    `clients: ${r.clients.length}`,
    ...r.clients.map(
      (c) =>
        `  ${c.client_id} (${c.type}) ${c.status}${c.new_secret ? `; new secret (shown only now): ${c.new_secret}` : ''}`,
    ),
  ];
  if (r.not_carried.length) {
    lines.push(`not carried over: ${r.not_carried.length}`);
    for (const n of r.not_carried) lines.push(`  ${n.kind} ${n.subject}: ${n.detail}`);
  }
  return lines.join('\n');
}

export const importCommands: CommandDef[] = [
  {
    group: 'import',
    name: 'keycloak',
    summary:
      'bring users (with their password hashes) and OpenID Connect clients from a Keycloak realm export; reports what cannot be carried over (docs/migrating.md)',
    args: [{ name: 'file', description: 'the realm export (kc.sh export --realm <name> --file <file>)' }],
    options: {
      org: { type: 'string', value: '<id>', required: true, description: 'organization the users join' },
      'dry-run': { type: 'boolean', description: 'read and check everything, report what would happen; write nothing' },
    },
    async run(ctx, v, [file]) {
      const orgId = intOption(required(v, 'org'), 'org');
      const org = await findOrganization(ctx.store.db, orgId);
      if (!org) throw notFound(`organization ${orgId} does not exist`);
      const dryRun = v['dry-run'] === true;
      const realm = await readKeycloakExport(file!, org.realm);
      const notCarried = [...realm.notCarried];
      const users = await importRealmUsers(ctx, realm, orgId, file!, dryRun);
      const rejected = new Set(users.rejections.map((r) => r.line));
      const disabled = await disableRealmUsers(ctx, realm, orgId, rejected, dryRun);
      const added = await addRealmClients(ctx, realm, dryRun, notCarried);
      const report: KeycloakReport = {
        ...{ realm: realm.realm, dry_run: dryRun, users, disabled },
        ...{ clients: added, not_carried: notCarried },
      };
      if (users.rejected > 0) ctx.exitCode = 1;
      return ctx.json ? report : reportText(report);
    },
  },
];
