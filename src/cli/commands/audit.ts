// `audit list`: passkey deletions, imports, counter regressions.
import { badRequest } from '../../errors.ts';
import { listAuditEvents } from '../../store/audit.ts';
import { iso } from '../../time.ts';
import { intOption, optional, table, type CommandDef } from '../command.ts';

export const auditCommands: CommandDef[] = [
  {
    group: 'audit',
    name: 'list',
    summary: 'audit events (passkey deletions, imports, counter regressions)',
    options: {
      org: { type: 'string', value: '<id>', description: 'only this organization' },
      since: { type: 'string', value: '<ISO 8601 time>', description: 'only events at or after this time' },
      limit: { type: 'string', value: '<n>', description: 'at most this many events (default 1000)' },
    },
    async run(ctx, v) {
      const sinceText = optional(v, 'since');
      const since = sinceText === undefined ? undefined : Date.parse(sinceText);
      if (since !== undefined && Number.isNaN(since))
        throw badRequest(`--since '${sinceText}' is not a date or ISO 8601 time`);
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
        details: JSON.parse(r.details) as unknown,
      }));
      if (ctx.json) return view;
      return table(
        view.map((r) => ({ ...r, passkey_ids: r.passkey_ids.join(','), details: JSON.stringify(r.details) })),
        ['id', 'at', 'kind', 'client_id', 'org_id', 'eppn', 'passkey_ids', 'request_id'],
      );
    },
  },
];
