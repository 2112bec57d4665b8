// `mds` commands: import a FIDO Metadata Service blob, look up an authenticator model, and find (and
// delete) passkeys of models the FIDO Alliance has revoked or reported compromised
// (docs/authenticator-metadata.md).
import { readFileSync } from 'node:fs';
import { badRequest, notFound } from '../../errors.ts';
import { findOrganization } from '../../store/directory.ts';
import { findMdsAuthenticator } from '../../store/mds.ts';
import {
  compromisedPasskeys,
  importMetadataBlob,
  isRefusedStatus,
  removeCompromisedPasskeys,
  rootFromPem,
  type MdsImportSummary,
} from '../../webauthn/mds.ts';
import { AAGUID } from '../../webauthn/formats.ts';
import { iso } from '../../time.ts';
import { by, intOption, optional, table, type CommandDef, type Ctx, type Values } from '../command.ts';

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw badRequest(`${what} ${path}: ${code === 'ENOENT' ? 'no such file' : 'cannot be read'}; nothing was imported`);
  }
}

function importText(s: MdsImportSummary): string {
  return [
    `imported FIDO metadata blob ${s.serial}: ${s.entries} authenticators (${s.refused} with a refused status)`,
    `skipped ${s.skipped} entries without an AAGUID; next update due ${s.next_update}`,
  ].join('\n');
}

/** The organization named by --org, checked to exist; undefined: every organization. */
async function orgOption(ctx: Ctx, v: Values): Promise<number | undefined> {
  const value = optional(v, 'org');
  if (value === undefined) return undefined;
  const orgId = intOption(value, 'org');
  if (!(await findOrganization(ctx.store.db, orgId))) throw badRequest(`organization ${orgId} does not exist`);
  return orgId;
}

const REPORT_COLUMNS = ['id', 'org_id', 'eppn', 'aaguid', 'description', 'status'];

function iconText(icon: string | null): string {
  return icon ? `${icon.slice(0, icon.indexOf(','))} (${icon.length} characters)` : '-';
}

export const mdsCommands: CommandDef[] = [
  {
    group: 'mds',
    name: 'import',
    summary: 'import a FIDO Metadata Service (MDS3) blob downloaded from https://mds3.fidoalliance.org/',
    args: [{ name: 'blob', description: 'the blob file (a JWT)' }],
    options: {
      root: {
        type: 'string',
        value: '<ca.pem>',
        description: 'trust this root instead of the FIDO Alliance’s (GlobalSign Root CA - R3)',
      },
    },
    async run(ctx, v, [path]) {
      const rootPath = optional(v, 'root');
      const root = rootPath === undefined ? undefined : rootFromPem(readText(rootPath, 'root'));
      const summary = await importMetadataBlob(ctx.store, readText(path!, 'blob'), { ...by(ctx), root });
      return ctx.json ? summary : importText(summary);
    },
  },
  {
    group: 'mds',
    name: 'status',
    summary: 'show what the imported metadata says about an authenticator model',
    args: [{ name: 'aaguid', description: 'the authenticator model’s AAGUID' }],
    options: {},
    async run(ctx, _v, [value]) {
      const aaguid = value!.toLowerCase();
      if (!AAGUID.test(aaguid)) throw badRequest('aaguid must be a UUID such as ee882879-721c-4913-9775-3dfcce97072a');
      const row = await findMdsAuthenticator(ctx.store.db, aaguid);
      if (!row) throw notFound(`no imported metadata for aaguid ${aaguid}`);
      const view = {
        aaguid: row.aaguid,
        description: row.description,
        status: row.status,
        status_date: row.status_date,
        refused: isRefusedStatus(row.status),
        icon: row.icon,
        updated_at: iso(row.updated_at),
      };
      if (ctx.json) return { ...view, statement: JSON.parse(row.statement) as unknown };
      const lines = Object.entries({ ...view, icon: iconText(row.icon) }).map(([k, x]) => [k, String(x ?? '-')]);
      const width = Math.max(...lines.map(([k]) => k!.length));
      return lines.map(([k, x]) => `${k!.padEnd(width)}  ${x}`).join('\n');
    },
  },
  {
    group: 'mds',
    name: 'report',
    summary: 'list passkeys of authenticator models with a refused status (revoked, compromised); or delete them',
    options: {
      org: { type: 'string', value: '<id>', description: 'only this organization’s passkeys' },
      delete: { type: 'boolean', description: 'delete them (audited like the passkey API’s deletions)' },
      reason: { type: 'string', value: '<text>', description: 'why, for the audit trail (with --delete)' },
    },
    async run(ctx, v) {
      const reason = optional(v, 'reason');
      if (v.delete === true && reason === undefined) throw badRequest('--reason is required with --delete');
      if (v.delete !== true && reason !== undefined) throw badRequest('--reason goes with --delete');
      const orgId = await orgOption(ctx, v);
      if (v.delete === true) {
        const { deleted } = await removeCompromisedPasskeys(ctx.store, reason!, by(ctx), orgId);
        return ctx.json ? { deleted: deleted.length, ids: deleted } : `deleted ${deleted.length} passkeys`;
      }
      const rows = await compromisedPasskeys(ctx.store.db, orgId);
      return ctx.json
        ? rows
        : table(
            rows.map((r) => ({ ...r })),
            REPORT_COLUMNS,
          );
    },
  },
];
