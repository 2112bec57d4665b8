// `passkey` commands: import credentials from another IdP, list passkeys.
import { readFileSync } from 'node:fs';
import { passkeyDetails, passkeyObject } from '../../webauthn/passkey-object.ts';
import { badRequest } from '../../errors.ts';
import { normalizeEppn } from '../../directory/index.ts';
import { findOrganization, findUserByEppn } from '../../store/directory.ts';
import { listOrganizationPasskeys, listUserPasskeys, type PasskeyListRow } from '../../store/passkeys.ts';
import { importPasskeys } from '../../webauthn/import.ts';
import { by, intOption, optional, required, table, type CommandDef, type Ctx } from '../command.ts';

export const passkeyCommands: CommandDef[] = [
  {
    group: 'passkey',
    name: 'import',
    summary: 'import WebAuthn credentials from another IdP, all or nothing',
    options: {
      file: {
        type: 'string',
        value: '<json>',
        required: true,
        description: 'JSON array of credentials (README: Admin CLI)',
      },
    },
    async run(ctx, v) {
      const path = required(v, 'file');
      let data: unknown;
      try {
        data = JSON.parse(readFileSync(path, 'utf8'));
      } catch (err) {
        throw badRequest(
          `${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : 'not valid JSON'}`,
        );
      }
      const result = await importPasskeys(ctx.store, data, by(ctx));
      return ctx.json ? result : `imported ${result.imported} passkeys`;
    },
  },
  {
    group: 'passkey',
    name: 'list',
    summary: "list an organization's passkeys, or one user's",
    options: {
      org: { type: 'string', value: '<id>', required: true, description: 'organization id' },
      eppn: { type: 'string', value: '<eppn>', description: 'only this user’s passkeys' },
      details: {
        type: 'boolean',
        description: 'add what is known of each authenticator: name, synced or device-bound, attested, metadata status',
      },
    },
    async run(ctx, v) {
      const orgId = intOption(required(v, 'org'), 'org');
      const org = await findOrganization(ctx.store.db, orgId);
      if (!org) throw badRequest(`organization ${orgId} does not exist`);
      let rows;
      const eppn = optional(v, 'eppn');
      if (eppn !== undefined) {
        const user = await findUserByEppn(ctx.store.db, normalizeEppn(eppn));
        if (!user || user.org_id !== orgId) throw badRequest(`user '${eppn}' does not exist in organization ${orgId}`);
        rows = await listUserPasskeys(ctx.store.db, user.id, 0, Number.MAX_SAFE_INTEGER);
      } else {
        rows = await listOrganizationPasskeys(ctx.store.db, orgId, 0, Number.MAX_SAFE_INTEGER);
      }
      const columns = ['id', 'eppn', 'label', 'created_at', 'last_used_at', 'mfa_verified', 'aaguid'];
      if (v.details !== true) return ctx.json ? rows.map(passkeyObject) : table(rows.map(passkeyObject), columns);
      const view = await withDetails(ctx, rows);
      if (ctx.json) return view;
      const flat = view.map(({ authenticator: a, ...p }) => ({
        ...p,
        model: a?.name ?? '-',
        kind: a?.synced ? 'synced' : 'device-bound',
        attested: a?.attested ? 'yes' : 'no',
        status: a?.metadata_status ?? '-',
      }));
      return table(flat, ['id', 'eppn', 'label', 'model', 'kind', 'attested', 'status', 'last_used_at']);
    },
  },
];

/** The passkey objects of the API with an `authenticator` object beside them (passkey list --details). */
async function withDetails(ctx: Ctx, rows: PasskeyListRow[]) {
  const details = await passkeyDetails(
    ctx.store.db,
    rows.map((r) => r.id),
    ctx.config.aaguidData,
  );
  return rows.map((r) => ({ ...passkeyObject(r), authenticator: details.get(r.id) }));
}
