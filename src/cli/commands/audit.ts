// `audit list` and `audit export`: the audit trail, filtered by actor, subject, action,
// organization and time. list pages newest first by record id (keyset: --before); export walks
// the whole selection oldest first and writes JSON lines.
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { badRequest } from '../../errors.ts';
import { AUDIT_ACTIONS, auditView } from '../../audit/index.ts';
import { listAuditEvents, type AuditFilter } from '../../store/audit.ts';
import { intOption, optional, table, type CommandDef, type OptionDef, type Values } from '../command.ts';

const FILTERS: Record<string, OptionDef> = {
  actor: { type: 'string', value: '<id>', description: 'who acted: an eppn, a client id, cli:<login>' },
  subject: {
    type: 'string',
    value: '<id>',
    description: 'what was acted on: an eppn, a client id, an organization id',
  },
  action: {
    type: 'string',
    value: '<action>',
    description: "an action (user.disable) or a family ending in '.' (passkey.)",
  },
  org: { type: 'string', value: '<id>', description: 'only this organization' },
  since: { type: 'string', value: '<ISO 8601 time>', description: 'only records at or after this time' },
  until: { type: 'string', value: '<ISO 8601 time>', description: 'only records before this time' },
};

function time(v: Values, name: string): number | undefined {
  const text = optional(v, name);
  if (text === undefined) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) throw badRequest(`--${name} '${text}' is not a date or ISO 8601 time`);
  return at;
}

function action(v: Values): string | undefined {
  const value = optional(v, 'action');
  if (value === undefined) return undefined;
  const known = value.endsWith('.')
    ? AUDIT_ACTIONS.some((a) => a.startsWith(value))
    : AUDIT_ACTIONS.includes(value as never);
  if (!known) throw badRequest(`--action '${value}' is not an audit action (known: ${AUDIT_ACTIONS.join(' ')})`);
  return value;
}

function filterOf(v: Values): AuditFilter {
  return {
    orgId: v.org === undefined ? undefined : intOption(v.org, 'org'),
    actor: optional(v, 'actor'),
    subject: optional(v, 'subject'),
    action: action(v),
    since: time(v, 'since'),
    until: time(v, 'until'),
  };
}

const EXPORT_BATCH = 1000;

export const auditCommands: CommandDef[] = [
  {
    group: 'audit',
    name: 'list',
    summary: 'audit records, newest first; --before <id> continues a listing',
    options: {
      ...FILTERS,
      before: { type: 'string', value: '<id>', description: 'only records older than this record id (the next page)' },
      limit: { type: 'string', value: '<n>', description: 'at most this many records (default 100, at most 1000)' },
    },
    async run(ctx, v) {
      const limit = v.limit === undefined ? 100 : intOption(v.limit, 'limit');
      if (limit > 1000) throw badRequest('--limit must be at most 1000');
      const before = v.before === undefined ? undefined : intOption(v.before, 'before');
      const rows = await listAuditEvents(ctx.store.db, { ...filterOf(v), before, limit: limit + 1 });
      const more = rows.length > limit;
      const view = rows.slice(0, limit).map(auditView);
      const next = more ? view[view.length - 1]!.id : null;
      if (ctx.json) return view;
      const lines = table(
        view.map((r) => ({ ...r, passkey_ids: r.passkey_ids.join(','), details: JSON.stringify(r.details) })),
        ['id', 'at', 'action', 'actor', 'subject', 'org_id', 'client_id', 'passkey_ids', 'source', 'request_id'],
      );
      return next === null ? lines : `${lines}\nmore: --before ${next}`;
    },
  },
  {
    group: 'audit',
    name: 'export',
    summary: 'write the selected audit records as JSON lines, oldest first (standard output or --output)',
    options: {
      ...FILTERS,
      output: { type: 'string', value: '<file>', description: 'write to this file (created, never overwritten)' },
    },
    async run(ctx, v) {
      const filter = filterOf(v);
      const path = optional(v, 'output');
      const file = path === undefined ? undefined : createWriteStream(path, { flags: 'wx', mode: 0o600 });
      if (file)
        await Promise.race([once(file, 'open'), once(file, 'error').then(([err]) => Promise.reject(err as Error))]);
      const write = async (line: string) => {
        if (!file) return ctx.io.out(line);
        if (!file.write(`${line}\n`)) await once(file, 'drain');
      };
      let after = 0;
      let count = 0;
      for (;;) {
        const rows = await listAuditEvents(ctx.store.db, { ...filter, after, limit: EXPORT_BATCH });
        for (const row of rows) await write(JSON.stringify(auditView(row)));
        count += rows.length;
        if (rows.length < EXPORT_BATCH) break;
        after = rows[rows.length - 1]!.id;
      }
      if (file) {
        file.end();
        await once(file, 'finish');
        return ctx.json ? { exported: count, file: path } : `${count} record(s) written to ${path}`;
      }
      return undefined;
    },
  },
];
