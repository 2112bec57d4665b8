// `saml` commands: the SAML service providers (`saml sp ...`) and the identity provider's SAML
// keys (`saml keys ...`).
import * as sps from '../../service-providers/index.ts';
import { samlFederationCommands } from './saml-federation.ts';
import { parseList } from '../../clients/index.ts';
import { readCertificate } from '../../saml/xml/index.ts';
import { badRequest } from '../../errors.ts';
import { iso } from '../../time.ts';
import { ATTRIBUTE_GROUPS } from '../../vocabulary.ts';
import {
  by,
  optional,
  repeated,
  required,
  table,
  type CommandDef,
  type Ctx,
  type OptionDef,
  type Values,
} from '../command.ts';

function spView(sp: sps.ServiceProvider) {
  const d = sp.descriptor;
  return {
    entity_id: sp.entityId,
    client_id: sp.clientId,
    name: sp.name,
    status: sp.disabled ? 'disabled' : 'active',
    groups: sp.groups,
    // what the groups release to this SP, from the one release table (src/directory/attribute-release.ts)
    attributes: sps.releasedAttributeNames(sp).map((a) => ({ friendly_name: a.friendlyName, name: a.name })),
    first_party: sp.firstParty,
    nameid: sp.nameId,
    encrypt: sp.encrypt,
    sign: sp.sign,
    allow_unsolicited: sp.allowUnsolicited,
    federation_id: sp.federationId,
    assertion_consumer_services: d.assertionConsumerServices.map((e) => `${e.index ?? '-'} ${e.binding} ${e.location}`),
    single_logout_services: d.singleLogoutServices.map((e) => `${e.binding} ${e.location}`),
    signing_certificates: d.signingCertificates.map((pem) => readCertificate(pem).sha256Fingerprint),
    encryption_certificates: d.encryptionCertificates.map((pem) => readCertificate(pem).sha256Fingerprint),
    authn_requests_signed: d.authnRequestsSigned,
    want_assertions_signed: d.wantAssertionsSigned,
    nameid_formats: d.nameIdFormats,
    entity_categories: d.entityCategories,
    subject_id_requirement: d.subjectIdRequirement ?? null,
    metadata_valid_until: d.validUntil === undefined ? null : iso(d.validUntil),
    created_at: iso(sp.createdAt),
    updated_at: iso(sp.updatedAt),
  };
}

type AttributeView = { friendly_name: string; name: string };

function showSp(ctx: Ctx, sp: sps.ServiceProvider) {
  const view = spView(sp);
  if (ctx.json) return view;
  return Object.entries(view)
    .map(([k, v]) => {
      if (Array.isArray(v)) {
        const lines = v.map((item: unknown) =>
          typeof item === 'string'
            ? item
            : `${(item as AttributeView).friendly_name} (${(item as AttributeView).name})`,
        );
        return `${k.padEnd(28)} ${lines.length ? lines.join(`\n${' '.repeat(29)}`) : '-'}`;
      }
      return `${k.padEnd(28)} ${v === null ? '-' : String(v)}`;
    })
    .join('\n');
}

const ENTITY_ID = [{ name: 'entity_id', description: "the service provider's entityID" }];

/** The options add and update share. */
const SETTINGS: Record<string, OptionDef> = {
  groups: {
    type: 'string',
    value: '"..."',
    description: `attribute groups released to the SP (${ATTRIBUTE_GROUPS.join(' ')}); "" releases none`,
  },
  name: { type: 'string', value: '<name>', description: 'shown on the consent page and in the console' },
  'first-party': { type: 'boolean', description: "the organization's own service: no consent page" },
  nameid: {
    type: 'string',
    value: 'persistent|transient|email|none',
    description: 'the NameID sent (default persistent: opaque, stable, different for every SP)',
  },
  encrypt: {
    type: 'string',
    value: 'auto|always|never',
    description: 'encrypt assertions (default auto: when the metadata publishes an encryption key)',
  },
  sign: {
    type: 'string',
    value: 'response|assertion|both',
    description: 'what is signed (default assertion: what mod_auth_mellon and Shibboleth SP check)',
  },
  'allow-unsolicited': {
    type: 'boolean',
    description: 'allow IdP-initiated sign-in at /saml2/idp/unsolicited',
  },
};

/** --flag sets, --no-flag clears, neither leaves it (update). */
function toggle(v: Values, name: string): boolean | undefined {
  if (v[name] === true && v[`no-${name}`] === true) throw badRequest(`give --${name} or --no-${name}, not both`);
  if (v[name] === true) return true;
  return v[`no-${name}`] === true ? false : undefined;
}

function settings(v: Values) {
  return {
    name: optional(v, 'name'),
    groups: v.groups === undefined ? undefined : parseList(optional(v, 'groups')),
    nameId: optional(v, 'nameid'),
    encrypt: optional(v, 'encrypt'),
    sign: optional(v, 'sign'),
  };
}

const add: CommandDef = {
  group: 'saml',
  name: 'sp add',
  summary: 'register a SAML service provider from its metadata (a file or an https URL)',
  options: {
    metadata: {
      type: 'string',
      value: '<file|https URL>',
      required: true,
      description: "the SP's metadata: one EntityDescriptor",
    },
    ...SETTINGS,
  },
  async run(ctx, v) {
    const metadata = await sps.readMetadataSource(required(v, 'metadata'));
    const sp = await sps.addServiceProvider(
      ctx.store,
      {
        metadata,
        ...settings(v),
        firstParty: v['first-party'] === true,
        allowUnsolicited: v['allow-unsolicited'] === true,
      },
      by(ctx),
    );
    return showSp(ctx, sp);
  },
};

const update: CommandDef = {
  group: 'saml',
  name: 'sp update',
  summary: 'change a service provider: new metadata (same entityID), groups, name, NameID, encryption, signing',
  args: ENTITY_ID,
  options: {
    metadata: { type: 'string', value: '<file|https URL>', description: 'new metadata of the same entityID' },
    ...SETTINGS,
    'no-first-party': { type: 'boolean', description: 'show the consent page again' },
    'no-allow-unsolicited': { type: 'boolean', description: 'refuse IdP-initiated sign-in again' },
  },
  async run(ctx, v, [entityId]) {
    const source = optional(v, 'metadata');
    const sp = await sps.updateServiceProvider(
      ctx.store,
      entityId!,
      {
        ...(source === undefined ? {} : { metadata: await sps.readMetadataSource(source) }),
        ...settings(v),
        firstParty: toggle(v, 'first-party'),
        allowUnsolicited: toggle(v, 'allow-unsolicited'),
      },
      by(ctx),
    );
    return showSp(ctx, sp);
  },
};

function enable(name: 'enable' | 'disable', enabled: boolean, summary: string): CommandDef {
  return {
    group: 'saml',
    name: `sp ${name}`,
    summary,
    args: ENTITY_ID,
    options: {},
    async run(ctx, _v, [entityId]) {
      const r = await sps.setServiceProviderEnabled(ctx.store, entityId!, enabled, by(ctx));
      if (ctx.json) {
        // a block of a federation SP that no trusted federation lists any more is lifted all the same
        const view = r.serviceProvider ? spView(r.serviceProvider) : { entity_id: entityId };
        return { ...view, changed: r.changed };
      }
      return r.changed ? `service provider ${entityId} ${name}d` : `service provider ${entityId} was already ${name}d`;
    },
  };
}

const spCommands: CommandDef[] = [
  add,
  {
    group: 'saml',
    name: 'sp list',
    summary: 'list the registered service providers',
    options: {},
    async run(ctx) {
      const all = (await sps.listServiceProviders(ctx.store)).map(spView);
      if (ctx.json) return all;
      return table(
        all.map((s) => ({ ...s, groups: s.groups.join(' ') })),
        ['entity_id', 'name', 'status', 'groups', 'nameid', 'encrypt', 'sign'],
      );
    },
  },
  {
    group: 'saml',
    name: 'sp show',
    summary: 'show a service provider: settings, endpoints and key fingerprints from its metadata',
    args: ENTITY_ID,
    options: {},
    run: async (ctx, _v, [entityId]) => showSp(ctx, await sps.getServiceProvider(ctx.store, entityId!)),
  },
  update,
  enable('disable', false, 'refuse the SP at once on every instance (a federation SP too); its grants are revoked'),
  enable('enable', true, 'accept a disabled SP again'),
  {
    group: 'saml',
    name: 'sp remove',
    summary: "delete a service provider with its client, grants and users' consents",
    args: ENTITY_ID,
    options: {},
    async run(ctx, _v, [entityId]) {
      const r = await sps.removeServiceProvider(ctx.store, entityId!, by(ctx));
      return ctx.json
        ? { entity_id: entityId, removed: true, artifacts_deleted: r.artifacts }
        : `service provider ${entityId} removed`;
    },
  },
];

/** The host name of PUBLIC_URL: the common name of the keys' certificates. */
export const keyCommonName = (publicUrl: string) => new URL(publicUrl).hostname;

function keyView(
  k: {
    kid: string;
    use: string;
    certificate: string;
    createdAt: number;
    activatesAt: number;
    retiresAt: number | null;
  },
  now: number,
) {
  const state = k.activatesAt > now ? 'next' : k.retiresAt !== null && k.retiresAt <= now ? 'retired' : 'active';
  return {
    kid: k.kid,
    use: k.use,
    state,
    sha256_fingerprint: readCertificate(k.certificate).sha256Fingerprint,
    created_at: iso(k.createdAt),
    activates_at: iso(k.activatesAt),
    retires_at: k.retiresAt === null ? null : iso(k.retiresAt),
  };
}

function uses(v: Values): sps.SamlKeyUse[] {
  const asked = (repeated(v, 'use') ?? []).flatMap((u) => parseList(u));
  if (asked.length === 0) return [...sps.SAML_KEY_USES];
  for (const use of asked)
    if (!(sps.SAML_KEY_USES as readonly string[]).includes(use))
      throw badRequest(`--use must be one of ${sps.SAML_KEY_USES.join(', ')}, not '${use.slice(0, 50)}'`);
  return [...new Set(asked)] as sps.SamlKeyUse[];
}

const keyCommands: CommandDef[] = [
  {
    group: 'saml',
    name: 'keys list',
    summary: "the identity provider's SAML keys (signing, encryption, metadata); made on first use",
    options: {},
    async run(ctx) {
      await sps.ensureSamlKeys(ctx.store, ctx.keys, Date.now(), keyCommonName(ctx.config.publicUrl));
      const now = Date.now();
      const all = (await sps.listSamlKeys(ctx.store)).map((k) => keyView(k, now));
      if (ctx.json) return all;
      return table(all, ['kid', 'use', 'state', 'activates_at', 'retires_at', 'sha256_fingerprint']);
    },
  },
  {
    group: 'saml',
    name: 'keys rotate',
    summary: 'new SAML keys: in the metadata at once, in use after 12 hours (twice the metadata cacheDuration)',
    options: {
      use: {
        type: 'string',
        multiple: true,
        value: 'signing|encryption|metadata',
        description: 'rotate only these (default: all three)',
      },
    },
    async run(ctx, v) {
      const added = await sps.rotateSamlKeys(
        ctx.store,
        ctx.keys,
        uses(v),
        by(ctx),
        keyCommonName(ctx.config.publicUrl),
      );
      const view = added.map((k) => ({ kid: k.kid, use: k.use, activates_at: iso(k.activatesAt) }));
      if (ctx.json) return view;
      return `${view.map((k) => `new ${k.use} key ${k.kid}, in use from ${k.activates_at}`).join('\n')}\nThe metadata publishes the new keys now; the previous ones stay published until then.`;
    },
  },
];

export const samlCommands: CommandDef[] = [...spCommands, ...keyCommands, ...samlFederationCommands];
