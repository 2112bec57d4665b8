// `invite`: e-mail the users of an organization a link to create their first passkey (an
// invitation carries a one-time recovery link; docs/email.md), and later remind those who have not.
import { badRequest } from '../../errors.ts';
import { isLocale } from '../../ui/i18n.ts';
import { inviteUsers, remindInvited, type InvitationResult } from '../../webauthn/invitations.ts';
import { by, durationOption, intOption, optional, repeated, type CommandDef, type Ctx } from '../command.ts';

const SHOWN_SKIPPED = 50;

function summary(r: InvitationResult, what: string): string {
  const lines = [
    `${r.dry_run ? 'would queue' : 'queued'} ${r.queued} ${what}${r.queued === 1 ? '' : 's'} for organization ${r.org_id}` +
      (r.skipped.length ? `; skipped ${r.skipped.length}:` : ''),
    ...r.skipped.slice(0, SHOWN_SKIPPED).map((s) => `  ${s.eppn}: ${s.reason.replace('_', ' ')}`),
  ];
  if (r.skipped.length > SHOWN_SKIPPED)
    lines.push(`  ... and ${r.skipped.length - SHOWN_SKIPPED} more (--json lists them all)`);
  if (r.dry_run) lines.push('dry run: nothing was sent');
  return lines.join('\n');
}

/** A progress bar on a terminal's stderr, redrawn at most every 200 ms. */
function progressBar(ctx: Ctx) {
  let last = 0;
  return (done: number, total: number) => {
    const now = Date.now();
    if (!ctx.io.progress || (now - last < 200 && done < total)) return;
    last = now;
    const filled = Math.round((done / total) * 30);
    ctx.io.progress(`[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${done}/${total}${done === total ? '\n' : ''}`);
  };
}

function language(value: string | undefined): string | undefined {
  if (value === undefined || isLocale(value)) return value;
  throw badRequest('--lang must be en or nb');
}

export const inviteCommands: CommandDef[] = [
  {
    group: 'invite',
    name: '',
    summary: 'e-mail users of an organization a one-time link to create their first passkey (docs/email.md)',
    options: {
      org: { type: 'string', value: '<org_id>', required: true, description: 'the organization' },
      eppn: {
        type: 'string',
        multiple: true,
        value: '<eppn>',
        description: 'only this user (repeat); default: every user of the organization with an e-mail address',
      },
      'without-passkey': { type: 'boolean', description: 'only users who have no passkey yet' },
      ttl: { type: 'string', value: '<duration>', description: 'how long the link works: 14d (default), at most 30d' },
      'remind-after': {
        type: 'string',
        value: '<duration>',
        description: 'remind those who have not acted after this long (7d); `invite --remind` sends the reminders',
      },
      remind: {
        type: 'boolean',
        description: 'send the reminders now due (a new link each, the earlier one revoked) instead of invitations',
      },
      lang: {
        type: 'string',
        value: '<en|nb>',
        description: 'the language for users whose own is not known (default en)',
      },
      'dry-run': { type: 'boolean', description: 'show who would get a message, and send nothing' },
    },
    async run(ctx, v) {
      const orgId = intOption(optional(v, 'org'), 'org');
      const ttl = optional(v, 'ttl');
      const setup = { publicUrl: ctx.config.publicUrl, mail: ctx.config.smtpUrl !== undefined };
      const common = {
        orgId,
        ttlMs: ttl === undefined ? undefined : durationOption(ttl, 'ttl'),
        dryRun: v['dry-run'] === true,
        lang: language(optional(v, 'lang')),
      };
      if (v.remind === true) {
        if (repeated(v, 'eppn') || v['without-passkey'] === true || optional(v, 'remind-after') !== undefined)
          throw badRequest('--remind takes only --org, --ttl, --lang and --dry-run');
        const r = await remindInvited(ctx.store, ctx.keys, setup, common, by(ctx));
        return ctx.json ? r : summary(r, 'reminder');
      }
      const remindAfter = optional(v, 'remind-after');
      const r = await inviteUsers(
        ctx.store,
        ctx.keys,
        setup,
        {
          ...common,
          eppns: repeated(v, 'eppn'),
          withoutPasskey: v['without-passkey'] === true,
          remindAfterMs: remindAfter === undefined ? undefined : durationOption(remindAfter, 'remind-after'),
        },
        by(ctx),
        progressBar(ctx),
      );
      return ctx.json ? r : summary(r, 'invitation');
    },
  },
];
