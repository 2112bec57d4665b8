// `org` commands: organizations (realm = the part after @ in their users' eppn).
import { requireMail } from '../../webauthn/invitations.ts';
import { addOrganization, setOrganizationBrand, setOrganizationDisabled } from '../../directory/index.ts';
import { BrandError, brandColor, brandFooter, brandName, brandUrl, readLogoFile, type Brand } from '../../brand.ts';
import { findOrganization, listOrganizations } from '../../store/directory.ts';
import { iso } from '../../time.ts';
import { removeOrganization, organizationFootprint } from '../../oauth/account-lifecycle.ts';
import { AppError } from '../../errors.ts';
import {
  aaguidOption,
  attestationOption,
  DEFAULT_POLICY,
  loadPolicy,
  policyJson,
  setPasskeyPolicy,
  type PasskeyPolicy,
} from '../../webauthn/policy.ts';
import { by, confirmed, intOption, required, table, type CommandDef, type Ctx } from '../command.ts';

export const orgCommands: CommandDef[] = [
  {
    group: 'org',
    name: 'add',
    summary: "add an organization (realm = the part after @ in its users' eppn)",
    options: {
      id: {
        type: 'string',
        value: '<n>',
        required: true,
        description: 'numeric organization id, the org_id of the passkey API',
      },
      realm: {
        type: 'string',
        value: '<realm>',
        required: true,
        description: "domain after @ in the users' eppn, e.g. example.org",
      },
      name: { type: 'string', value: '<name>', required: true, description: 'display name' },
    },
    async run(ctx, v) {
      const org = await addOrganization(
        ctx.store,
        { id: intOption(required(v, 'id'), 'id'), realm: required(v, 'realm'), name: required(v, 'name') },
        by(ctx),
      );
      return ctx.json ? { ...org, created_at: iso(org.created_at) } : `organization ${org.id} (${org.realm}) added`;
    },
  },
  {
    group: 'org',
    name: 'list',
    summary: 'list organizations',
    options: {},
    async run(ctx) {
      const orgs = (await listOrganizations(ctx.store.db)).map(({ branding, disabled_at, ...o }) => ({
        ...o,
        created_at: iso(o.created_at),
        branded: branding !== null,
        status: disabled_at === null ? 'active' : 'disabled',
        disabled_at: disabled_at === null ? null : iso(disabled_at),
      }));
      return ctx.json ? orgs : table(orgs, ['id', 'realm', 'name', 'created_at', 'status']);
    },
  },
  enableOrDisable('disable', true, 'stop every user of an organization signing in, at once (enable undoes it)'),
  enableOrDisable('enable', false, 'let the users of a disabled organization sign in again'),
  {
    group: 'org',
    name: 'remove',
    summary: 'remove an organization; refused while it has users unless --force (shows what goes, then asks)',
    args: [{ name: 'org_id', description: 'the organization' }],
    options: {
      force: {
        type: 'boolean',
        description: 'also remove its users with their passkeys, photos, consents and sessions',
      },
      yes: { type: 'boolean', description: 'with --force: do not ask for confirmation (scripts)' },
    },
    async run(ctx, v, [id]) {
      const orgId = intOption(id, 'org_id');
      const force = v.force === true;
      if (force && v.yes !== true) await confirmRemoval(ctx, orgId);
      const r = await removeOrganization(ctx.store, orgId, { ...by(ctx), force });
      return ctx.json
        ? { id: r.id, removed: true, users_removed: r.users, passkeys_deleted: r.passkeys }
        : `organization ${r.id} removed (${r.users} user(s), ${r.passkeys} passkey(s))`;
    },
  },
  {
    group: 'org',
    name: 'brand',
    summary: "set an organization's branding over the deployment's (docs/branding.md)",
    args: [{ name: 'org_id', description: 'the organization' }],
    options: {
      name: { type: 'string', value: '<name>', description: 'product name shown on its pages (at most 60 characters)' },
      color: {
        type: 'string',
        value: '<#rrggbb>',
        description: 'accent colour on the light scheme (contrast >= 4.5:1)',
      },
      'color-dark': { type: 'string', value: '<#rrggbb>', description: 'accent colour on the dark scheme' },
      'logo-file': { type: 'string', value: '<path>', description: 'PNG, WebP or SVG logo, at most 100 KiB' },
      'support-url': { type: 'string', value: '<url>', description: 'help link (https or mailto)' },
      'privacy-url': { type: 'string', value: '<url>', description: 'privacy policy link (https)' },
      footer: { type: 'string', value: '<text>', description: 'footer text (at most 200 characters)' },
      clear: { type: 'boolean', description: "drop its branding first (alone: back to the deployment's)" },
    },
    async run(ctx, v, [id]) {
      const orgId = intOption(id, 'org_id');
      const brand = brandOptions(v);
      if (Object.keys(brand).length === 0 && v.clear !== true)
        throw new AppError(400, 'nothing to set: give at least one option, or --clear');
      const result = await setOrganizationBrand(ctx.store, orgId, { brand, clear: v.clear === true }, by(ctx));
      const shown = {
        ...result,
        logo: result.logo ? { type: result.logo.type, bytes: result.logo.data.length } : undefined,
      };
      return ctx.json
        ? { id: orgId, brand: shown }
        : `organization ${orgId} branding: ${Object.keys(result).sort().join(', ') || "the deployment's"}`;
    },
  },
  {
    group: 'org',
    name: 'policy',
    summary: "show or change an organization's authenticator policy (docs/passkey-policy.md)",
    args: [{ name: 'org_id', description: 'the organization' }],
    options: {
      'allow-aaguid': {
        type: 'string',
        multiple: true,
        value: '<uuid>',
        description: 'only these authenticators may register (repeat; replaces the list)',
      },
      'deny-aaguid': {
        type: 'string',
        multiple: true,
        value: '<uuid>',
        description: 'these authenticators may not register (repeat; replaces the list)',
      },
      'require-uv': { type: 'boolean', description: 'require user verification (PIN, biometrics)' },
      'require-device-bound': { type: 'boolean', description: 'refuse synced (backup-eligible) passkeys' },
      attestation: { type: 'string', value: '<none|direct|enterprise>', description: 'attestation asked for' },
      'passkey-upgrade': {
        type: 'string',
        value: '<on|off>',
        description: 'offer a passkey after a password sign-in (on by default)',
      },
      'passkey-only': {
        type: 'string',
        value: '<on|off>',
        description: 'users with a passkey cannot sign in with a password',
      },
      'on-deactivate': {
        type: 'string',
        value: '<keep|delete>',
        description: 'a user deactivated by provisioning (SCIM) keeps their passkeys (default) or loses them',
      },
      'self-recovery': {
        type: 'string',
        value: '<email|off>',
        description:
          "'Lost your passkey?' on the sign-in page e-mails the user a recovery link (off by default; docs/email.md)",
      },
      reset: { type: 'boolean', description: 'start from the defaults instead of the current policy' },
      show: { type: 'boolean', description: 'print the policy and change nothing' },
    },
    async run(ctx, v, [id]) {
      const orgId = intOption(id, 'org_id');
      const current = await loadPolicy(ctx.store.db, orgId);
      const changed = policyOptions(v, v.reset === true ? { ...DEFAULT_POLICY } : current);
      if (v['self-recovery'] === 'email')
        requireMail({ publicUrl: ctx.config.publicUrl, mail: ctx.config.smtpUrl !== undefined });
      if (v.show === true || !changed) {
        if (!(await findOrganization(ctx.store.db, orgId))) throw new AppError(404, `organization ${orgId} not found`);
        return showPolicy(ctx, orgId, current);
      }
      return showPolicy(ctx, orgId, await setPasskeyPolicy(ctx.store, orgId, changed, by(ctx)));
    },
  },
];

/**
 * `org disable` / `org enable`: while an organization is disabled none of its users signs in and
 * their tokens are refused; users disabled on their own stay disabled when it is enabled.
 */
function enableOrDisable(name: 'disable' | 'enable', disabled: boolean, summary: string): CommandDef {
  return {
    group: 'org',
    name,
    summary,
    args: [{ name: 'org_id', description: 'the organization' }],
    options: {},
    async run(ctx, _v, [id]) {
      const orgId = intOption(id, 'org_id');
      const r = await setOrganizationDisabled(ctx.store, orgId, disabled, by(ctx));
      if (ctx.json) return { id: r.id, disabled: r.disabled, changed: r.changed };
      if (!r.changed) return `organization ${r.id} was ${disabled ? 'already disabled' : 'not disabled'}`;
      return disabled
        ? `organization ${r.id} disabled: its users cannot sign in, their sessions and tokens are refused`
        : `organization ${r.id} enabled: its users can sign in again (users disabled on their own stay disabled)`;
    },
  };
}

function onOff(value: unknown, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new AppError(400, `--${name} must be on or off`);
}

function keepOrDelete(value: unknown): 'keep' | 'delete' | undefined {
  if (value === undefined || value === 'keep' || value === 'delete') return value;
  throw new AppError(400, '--on-deactivate must be keep or delete');
}

function emailOrOff(value: unknown): 'email' | 'off' | undefined {
  if (value === undefined || value === 'email' || value === 'off') return value;
  throw new AppError(400, '--self-recovery must be email or off');
}

/** The policy the options make from base; undefined when no option changes anything. */
function policyOptions(v: Record<string, unknown>, base: PasskeyPolicy): PasskeyPolicy | undefined {
  const list = (name: string) => (Array.isArray(v[name]) ? (v[name] as string[]).map(aaguidOption) : undefined);
  const changes: Partial<PasskeyPolicy> = {
    allowAaguids: list('allow-aaguid'),
    denyAaguids: list('deny-aaguid'),
    requireUv: v['require-uv'] === true ? true : undefined,
    requireDeviceBound: v['require-device-bound'] === true ? true : undefined,
    attestation: typeof v.attestation === 'string' ? attestationOption(v.attestation) : undefined,
    passkeyUpgrade: onOff(v['passkey-upgrade'], 'passkey-upgrade'),
    passkeyOnly: onOff(v['passkey-only'], 'passkey-only'),
    onDeactivate: keepOrDelete(v['on-deactivate']),
    selfRecovery: emailOrOff(v['self-recovery']),
  };
  const given = Object.entries(changes).filter(([, value]) => value !== undefined);
  if (given.length === 0 && v.reset !== true) return undefined;
  return { ...base, ...Object.fromEntries(given) };
}

function showPolicy(ctx: Ctx, orgId: number, policy: PasskeyPolicy) {
  const json = policyJson(policy);
  if (ctx.json) return { id: orgId, policy: json };
  const lines = Object.entries(json).map(
    ([key, value]) => `${key}: ${Array.isArray(value) ? value.join(', ') || '-' : String(value)}`,
  );
  return [`organization ${orgId} authenticator policy`, ...lines].join('\n');
}

const BRAND_OPTIONS: [string, keyof Brand, (raw: string) => Brand[keyof Brand]][] = [
  ['name', 'name', brandName],
  ['color', 'color', (raw) => brandColor(raw, 'light')],
  ['color-dark', 'colorDark', (raw) => brandColor(raw, 'dark')],
  ['logo-file', 'logo', readLogoFile],
  ['support-url', 'supportUrl', (raw) => brandUrl(raw, 'the support URL')],
  ['privacy-url', 'privacyUrl', (raw) => brandUrl(raw, 'the privacy policy URL')],
  ['footer', 'footer', brandFooter],
];

/** The branding options given, each checked; a refused one names its option. */
function brandOptions(v: Record<string, unknown>): Brand {
  const brand: Record<string, unknown> = {};
  for (const [option, key, check] of BRAND_OPTIONS) {
    const raw = v[option];
    if (typeof raw !== 'string') continue;
    try {
      brand[key] = check(raw);
    } catch (err) {
      if (err instanceof BrandError) throw new AppError(400, `--${option}: ${err.message}`);
      throw err;
    }
  }
  return brand;
}

/** The dry run of --force: what would go, then a typed confirmation (the organization id). */
async function confirmRemoval(ctx: Ctx, orgId: number): Promise<void> {
  const f = await organizationFootprint(ctx.store, orgId);
  ctx.io.err(
    `organization ${f.id} (${f.realm}, ${f.name}) would be removed with ${f.users} user(s) and ${f.passkeys} passkey(s), ` +
      'their photos, consents, sessions, grants and tokens; clients lose their grants for it.',
  );
  if (!(await confirmed(ctx, `type the organization id (${f.id}) to confirm: `, String(f.id))))
    throw new AppError(409, 'not confirmed; nothing was removed');
}
