// `upstream add|list|show|update|disable|enable|remove|link|unlink`: an organization's upstream
// identity providers (docs/upstream.md). An OpenID Connect client secret is read from standard
// input, sealed, and never shown.
import { badRequest, notFound } from '../../errors.ts';
import type { Logo } from '../../brand.ts';
import * as upstream from '../../upstream/providers.ts';
import { linkAccount, unlinkAccount } from '../../upstream/linking.ts';
import {
  readFederatedProviderMetadata,
  readSamlProviderMetadata,
  spAcsUrl,
  spEntityId,
} from '../../upstream/saml-provider.ts';
import { readUpstreamLogo } from '../../upstream/logo.ts';
import { federationSettings } from '../../service-providers/federations.ts';
import { findUserByEppn } from '../../store/directory.ts';
import { normalizeEppn } from '../../directory/index.ts';
import {
  by,
  intOption,
  optional,
  readPassword,
  repeated,
  required,
  table,
  type ArgumentDef,
  type CommandDef,
  type Ctx,
  type OptionDef,
  type Values,
} from '../command.ts';

const PROVIDER_ID: ArgumentDef[] = [{ name: 'id', description: 'the provider id (upstream list)' }];

function providerId(value: string | undefined): string {
  if (value === undefined) throw badRequest('id is required');
  return value;
}

function described(v: upstream.UpstreamView): string {
  const lines = Object.entries(v).map(
    ([k, value]) => `${k}: ${typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)}`,
  );
  return lines.join('\n');
}

/**
 * The SAML identity provider's metadata (a file, or an https URL fetched with a time limit and a
 * size cap), checked as strictly as any inbound SAML: one IdP, a signing certificate, a single
 * sign-on endpoint, valid against the metadata schema.
 */
async function samlMetadata(
  source: string | undefined,
): Promise<(upstream.SamlInput & { displayName?: string }) | undefined> {
  if (source === undefined) return undefined;
  return withButton(await readSamlProviderMetadata(source));
}

type ReadMetadata = Awaited<ReturnType<typeof readSamlProviderMetadata>>;

/** The checked metadata, with what the sign-in button may take from it (mdui). */
function withButton({ descriptor, ...input }: ReadMetadata): upstream.SamlInput & { displayName?: string } {
  return {
    ...input,
    ...(descriptor.displayName ? { displayName: descriptor.displayName } : {}),
  };
}

/**
 * Where `upstream add --type saml` takes the IdP from: a metadata document (`--metadata`), or a
 * trusted federation's verified aggregate by entityID (`--federation <id> --entity <entityID>`,
 * read with the same reader and checks), one or the other.
 */
async function samlSource(
  ctx: Ctx,
  v: Values,
  type: string,
): Promise<(upstream.SamlInput & { displayName?: string }) | undefined> {
  const metadata = optional(v, 'metadata');
  const federation = optional(v, 'federation');
  const entity = optional(v, 'entity');
  if (type !== 'saml') {
    if (metadata !== undefined || federation !== undefined || entity !== undefined)
      throw badRequest('--metadata, --federation and --entity are for --type saml');
    return undefined;
  }
  if (metadata !== undefined && (federation !== undefined || entity !== undefined))
    throw badRequest('give either --metadata or --federation with --entity, not both');
  if (federation !== undefined && entity === undefined)
    throw badRequest("--federation needs --entity <entityID>, the identity provider in the federation's metadata");
  if (entity !== undefined && federation === undefined)
    throw badRequest('--entity needs --federation <id>, the trusted federation that lists it (saml federation list)');
  if (federation === undefined || entity === undefined) return samlMetadata(required(v, 'metadata'));
  const read = await readFederatedProviderMetadata(
    ctx.store,
    federationSettings(ctx.config),
    intOption(federation, 'federation'),
    entity.trim(),
  );
  return withButton(read);
}

/** The SAML options an update changes (undefined when it changes none). */
function samlUpdate(v: Values): { samlOptions?: Pick<upstream.SamlInput, 'emailVerified' | 'requireEncryption'> } {
  const emailVerified = onOff(v, 'email-verified');
  const requireEncryption = onOff(v, 'require-encryption');
  if (emailVerified === undefined && requireEncryption === undefined) return {};
  return {
    samlOptions: {
      ...(emailVerified !== undefined ? { emailVerified } : {}),
      ...(requireEncryption !== undefined ? { requireEncryption } : {}),
    },
  };
}

/** `on|off` of an update option, or undefined when not given. */
function onOff(v: Values, name: string): boolean | undefined {
  const value = optional(v, name);
  if (value === undefined) return undefined;
  if (value !== 'on' && value !== 'off') throw badRequest(`--${name} must be on or off`);
  return value === 'on';
}

/** --logo <file|URL> sets, --no-logo (or --logo '') removes, neither leaves it (update). */
async function logoUpdate(v: Values): Promise<{ logo?: Logo | null }> {
  const source = optional(v, 'logo');
  if (source !== undefined && v['no-logo'] === true) throw badRequest('give --logo or --no-logo, not both');
  if (v['no-logo'] === true || source === '') return { logo: null };
  return source === undefined ? {} : { logo: await readUpstreamLogo(source) };
}

const SAML_ADD: Record<string, OptionDef> = {
  metadata: { type: 'string', value: '<file|https URL>', description: "SAML: the identity provider's metadata" },
  federation: {
    type: 'string',
    value: '<federation id>',
    description:
      "SAML, instead of --metadata: a trusted federation (saml federation list) whose verified metadata lists the identity provider; its refresh keeps the provider's keys and endpoints current",
  },
  entity: {
    type: 'string',
    value: '<entityID>',
    description: "SAML, with --federation: the identity provider's entityID in the federation's metadata",
  },
  'email-verified': {
    type: 'boolean',
    description:
      'SAML: the provider vouches for the mail attribute it releases (it counts as a verified address for --link-by email)',
  },
  'require-encryption': {
    type: 'boolean',
    description: 'SAML: refuse assertions that are not encrypted to this service',
  },
};

const COMMON: Record<string, OptionDef> = {
  name: {
    type: 'string',
    value: '<name>',
    description: 'the button text on the sign-in page (default: the host name)',
  },
  logo: {
    type: 'string',
    value: '<file|https URL>',
    description:
      'the logo on its button: a PNG, WebP or SVG of at most 100 KiB, from a file or fetched once from an https URL',
  },
  'link-by': {
    type: 'string',
    value: 'email|eppn|external_id|none',
    description:
      'how a first sign-in finds its account: a verified e-mail address, eppn or external id in the organization; none: only links an administrator or the user (account page) made (default none)',
  },
  'create-users': { type: 'boolean', description: 'a person with no account gets one in the organization' },
  map: {
    type: 'string',
    multiple: true,
    value: '<attribute>=<claim>',
    description:
      'an attribute from a claim (or SAML attribute), e.g. eppn=upn (defaults: email, name, given_name, ...)',
  },
  namespace: {
    type: 'string',
    value: '<namespace>',
    description:
      'its identities appear in userid_sec as <namespace>:<subject> (google, microsoft, apple, github, edugain, ...)',
  },
  scopes: { type: 'string', value: '"openid email profile"', description: 'OpenID Connect: the scopes asked for' },
  'trust-amr': {
    type: 'string',
    value: '<amr,...|none>',
    description:
      "which of the upstream's own amr values (RFC 8176: pwd, mfa, otp, hwk, ...) the session repeats after fed (default pwd)",
  },
};

function commonValues(v: Values) {
  return {
    name: optional(v, 'name'),
    linkBy: optional(v, 'link-by'),
    namespace: optional(v, 'namespace'),
    map: repeated(v, 'map'),
    scopes: optional(v, 'scopes'),
    trustAmr: optional(v, 'trust-amr'),
  };
}

export const upstreamCommands: CommandDef[] = [
  {
    group: 'upstream',
    name: 'add',
    summary: "add an upstream identity provider (OpenID Connect or SAML 2.0) to an organization's sign-in",
    options: {
      org: { type: 'string', value: '<org_id>', required: true, description: 'the organization' },
      type: { type: 'string', value: 'oidc|saml', required: true, description: 'the protocol' },
      issuer: {
        type: 'string',
        value: '<https URL>',
        description: 'OpenID Connect: the issuer (discovery is read from it)',
      },
      'client-id': {
        type: 'string',
        value: '<id>',
        description: 'OpenID Connect: this service as a client of the upstream',
      },
      'client-secret-stdin': {
        type: 'boolean',
        description: 'OpenID Connect: read the client secret from standard input',
      },
      'auth-method': {
        type: 'string',
        value: 'client_secret_basic|client_secret_post|private_key_jwt',
        description:
          'OpenID Connect: client authentication (default client_secret_basic); private_key_jwt makes a key whose public JWK `upstream show` prints',
      },
      ...SAML_ADD,
      ...COMMON,
    },
    async run(ctx, v) {
      const type = required(v, 'type');
      const clientSecret = v['client-secret-stdin'] === true ? await readPassword(ctx) : undefined;
      const metadata = await samlSource(ctx, v, type);
      const saml = metadata && {
        entityId: metadata.entityId,
        metadataXml: metadata.metadataXml,
        source: metadata.source,
        ...(metadata.federationId !== undefined ? { federationId: metadata.federationId } : {}),
        emailVerified: v['email-verified'] === true,
        requireEncryption: v['require-encryption'] === true,
      };
      // a SAML provider's button: its metadata's display name (mdui) unless given
      const fromMetadata =
        metadata?.displayName && optional(v, 'name') === undefined ? { name: metadata.displayName } : {};
      const logoSource = optional(v, 'logo');
      const logo = logoSource ? await readUpstreamLogo(logoSource) : undefined;
      const added = await upstream.addUpstreamProvider(
        ctx.store,
        ctx.keys,
        {
          orgId: intOption(required(v, 'org'), 'org'),
          type,
          ...commonValues(v),
          ...fromMetadata,
          ...(logo ? { logo } : {}),
          createUsers: v['create-users'] === true,
          issuer: optional(v, 'issuer'),
          clientId: optional(v, 'client-id'),
          clientSecret,
          authMethod: optional(v, 'auth-method'),
          saml,
        },
        by(ctx),
      );
      if (ctx.json) return added;
      const registered =
        added.type === 'saml'
          ? `service provider metadata to give the identity provider: ${spEntityId(ctx.config.publicUrl)}`
          : `redirect URI to register upstream: ${new URL(`/upstream/${added.id}/callback`, ctx.config.publicUrl).href}`;
      return `upstream provider ${added.id} (${added.type}, "${added.name}") for organization ${added.org_id}\n${registered}`;
    },
  },
  {
    group: 'upstream',
    name: 'list',
    summary: 'the upstream identity providers, of one organization or all',
    options: { org: { type: 'string', value: '<org_id>', description: 'only this organization' } },
    async run(ctx, v) {
      const org = optional(v, 'org');
      const list = await upstream.listUpstreamProviders(
        ctx.store,
        org === undefined ? undefined : intOption(org, 'org'),
      );
      if (ctx.json) return list;
      return table(list, [
        'id',
        'org_id',
        'type',
        'name',
        'enabled',
        'link_by',
        'create_users',
        'namespace',
        'federation_id',
      ]);
    },
  },
  {
    group: 'upstream',
    name: 'show',
    summary:
      'one upstream provider: its settings (never its secret) and its redirect URI (OIDC) or SP metadata and ACS (SAML)',
    args: PROVIDER_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const view = upstream.upstreamView(await upstream.loadUpstreamProvider(ctx.store, providerId(id)));
      const withUri =
        view.type === 'saml'
          ? { ...view, sp_metadata: spEntityId(ctx.config.publicUrl), acs: spAcsUrl(ctx.config.publicUrl) }
          : { ...view, redirect_uri: new URL(`/upstream/${view.id}/callback`, ctx.config.publicUrl).href };
      return ctx.json ? withUri : described(withUri);
    },
  },
  {
    group: 'upstream',
    name: 'update',
    summary: 'change a provider (its type, issuer and organization stay)',
    args: PROVIDER_ID,
    options: {
      'client-id': { type: 'string', value: '<id>', description: 'OpenID Connect: a new client id' },
      'client-secret-stdin': {
        type: 'boolean',
        description: 'OpenID Connect: read a new client secret from standard input',
      },
      'create-users': { type: 'string', value: 'on|off', description: 'a person with no account gets one' },
      metadata: {
        type: 'string',
        value: '<file|https URL>',
        description: "SAML: the identity provider's new metadata (of the same entityID)",
      },
      'email-verified': {
        type: 'string',
        value: 'on|off',
        description: 'SAML: the provider vouches for its mail attribute',
      },
      'require-encryption': { type: 'string', value: 'on|off', description: 'SAML: refuse unencrypted assertions' },
      ...Object.fromEntries(Object.entries(COMMON).filter(([k]) => k !== 'create-users')),
      'no-logo': { type: 'boolean', description: 'remove the logo (the button shows the name alone)' },
    },
    async run(ctx, v, [id]) {
      const create = optional(v, 'create-users');
      if (create !== undefined && create !== 'on' && create !== 'off')
        throw badRequest('--create-users must be on or off');
      const metadata = optional(v, 'metadata');
      const updated = await upstream.updateUpstreamProvider(
        ctx.store,
        ctx.keys,
        providerId(id),
        {
          ...commonValues(v),
          ...(await logoUpdate(v)),
          ...(create !== undefined ? { createUsers: create === 'on' } : {}),
          clientId: optional(v, 'client-id'),
          ...(v['client-secret-stdin'] === true ? { clientSecret: await readPassword(ctx) } : {}),
          ...(metadata !== undefined ? { saml: await samlMetadata(metadata) } : {}),
          ...samlUpdate(v),
        },
        by(ctx),
      );
      return ctx.json ? updated : described(updated);
    },
  },
  {
    group: 'upstream',
    name: 'disable',
    summary: 'stop signing in through the provider (at once, also for sign-ins under way); links are kept',
    args: PROVIDER_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const view = await upstream.setUpstreamEnabled(ctx.store, providerId(id), false, by(ctx));
      return ctx.json ? view : `upstream provider ${view.id} disabled`;
    },
  },
  {
    group: 'upstream',
    name: 'enable',
    summary: 'allow signing in through a disabled provider again',
    args: PROVIDER_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const view = await upstream.setUpstreamEnabled(ctx.store, providerId(id), true, by(ctx));
      return ctx.json ? view : `upstream provider ${view.id} enabled`;
    },
  },
  {
    group: 'upstream',
    name: 'remove',
    summary: 'remove a provider and its links (the accounts stay)',
    args: PROVIDER_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const removed = await upstream.removeUpstreamProvider(ctx.store, providerId(id), by(ctx));
      return ctx.json
        ? { ...removed, removed: true }
        : `removed upstream provider ${removed.id} ("${removed.name}") and its ${removed.links} link(s)`;
    },
  },
  {
    group: 'upstream',
    name: 'link',
    summary: 'link an account to an identity at the provider (the way in for --link-by none)',
    args: PROVIDER_ID,
    options: {
      eppn: { type: 'string', value: '<eppn>', required: true, description: 'the account' },
      subject: {
        type: 'string',
        value: '<subject>',
        required: true,
        description: "the identity's subject at the provider (OIDC sub, SAML NameID)",
      },
    },
    async run(ctx, v, [id]) {
      const link = await linkAccount(ctx.store, providerId(id), required(v, 'eppn'), required(v, 'subject'), by(ctx));
      return ctx.json ? link : `${normalizeEppn(required(v, 'eppn'))} linked to ${link.subject} at ${link.name}`;
    },
  },
  {
    group: 'upstream',
    name: 'unlink',
    summary: "remove an account's link to the provider",
    args: PROVIDER_ID,
    options: { eppn: { type: 'string', value: '<eppn>', required: true, description: 'the account' } },
    async run(ctx, v, [id]) {
      const user = await findUserByEppn(ctx.store.db, normalizeEppn(required(v, 'eppn')));
      if (!user) throw notFound(`user '${required(v, 'eppn')}' does not exist`);
      await unlinkAccount(ctx.store, providerId(id), user, by(ctx));
      return ctx.json ? { eppn: user.eppn, upstream: providerId(id), unlinked: true } : `unlinked ${user.eppn}`;
    },
  },
];
