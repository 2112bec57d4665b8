// The upstream provider registry (docs/upstream.md): every option checked before anything is
// stored, the OIDC client secret (or the private_key_jwt key) sealed under IDP_SECRET with the
// provider's id as associated data and never shown, each change one transaction with its audit record.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import type { Keyring } from '../crypto.ts';
import { open, seal } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { findOrganization } from '../store/directory.ts';
import { findFederation } from '../store/saml-federations.ts';
import * as repo from '../store/upstream.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, notFound } from '../errors.ts';
import { BrandError, brandLogo, type Logo } from '../brand.ts';
import { iso } from '../time.ts';
import { SECONDARY_NAMESPACES } from '../vocabulary.ts';
import { KNOWN_AMR } from './types.ts';
import {
  LINK_BY,
  OIDC_AUTH_METHODS,
  UPSTREAM_TYPES,
  type LinkBy,
  type OidcAuthMethod,
  type UpstreamProvider,
  type UpstreamType,
} from './types.ts';

export interface UpstreamInput {
  orgId: number;
  type: string;
  name?: string;
  /** the button's logo (read by readUpstreamLogo, src/upstream/logo.ts) */
  logo?: Logo;
  linkBy?: string;
  createUsers?: boolean;
  namespace?: string;
  /** `attribute=claim` pairs */
  map?: string[];
  /** the upstream amr values to repeat, comma- or space-separated, or `none` (default `pwd`) */
  trustAmr?: string;
  // OpenID Connect
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  scopes?: string;
  authMethod?: string;
  // SAML: the checked IdP metadata (the SAML side reads and validates the document)
  saml?: SamlInput;
}

/** A SAML provider's checked metadata (src/upstream/saml-provider.ts) and its options. */
export interface SamlInput {
  entityId: string;
  metadataXml: string;
  source?: string;
  /** the trusted federation the metadata was copied from (`--federation`): its refresh keeps it current */
  federationId?: number;
  emailVerified?: boolean;
  requireEncryption?: boolean;
}

export type UpstreamChanges = Partial<
  Pick<UpstreamInput, 'name' | 'linkBy' | 'createUsers' | 'namespace' | 'map' | 'scopes' | 'clientSecret' | 'trustAmr'>
> & {
  /** a new logo, or null to remove it */
  logo?: Logo | null;
  saml?: UpstreamInput['saml'];
  /** SAML: change the options alone, keeping the metadata */
  samlOptions?: Pick<SamlInput, 'emailVerified' | 'requireEncryption'>;
  clientId?: string;
};

const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const ATTRIBUTE = /^[a-z][a-z0-9_]{0,63}$/;
const CLAIM = /^[\x21-\x7e]{1,256}$/;
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/;
export const PROVIDER_ID = /^[a-z0-9]{12}$/;

const LOOPBACK = (host: string) => host === 'localhost' || host === '::1' || /^127\./.test(host);

/** https only; plain http only to a provider on this host (a test or a local proxy). */
export function checkIssuer(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw badRequest('--issuer must be an https URL, e.g. https://accounts.google.com');
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK(host)))
    throw badRequest('--issuer must be an https URL (plain http only to this host)');
  if (url.username || url.password || url.search || url.hash)
    throw badRequest('--issuer has no credentials, query or fragment');
  if (!isIP(host) && !/^[a-z0-9.-]{1,253}$/i.test(host)) throw badRequest('--issuer has an invalid host name');
  // The issuer is compared as given with the discovery document's and the ID token's `iss`.
  return raw.trim();
}

function checkName(name: string | undefined, fallback: string): string {
  const value = (name ?? fallback).trim();
  if (!value || value.length > 100 || CONTROL.test(value))
    throw badRequest('--name must be 1-100 characters, one line');
  return value;
}

/**
 * The logo's columns: checked again as the organizations' logos are (PNG, WebP or SVG by content, at
 * most 100 KiB), with a version of its content; all null to remove it.
 */
function logoColumns(logo: Logo | null): {
  logo_type: string | null;
  logo_data: Buffer | null;
  logo_etag: string | null;
} {
  if (logo === null) return { logo_type: null, logo_data: null, logo_etag: null };
  let checked: Logo;
  try {
    checked = brandLogo(logo.data);
  } catch (err) {
    if (err instanceof BrandError) throw badRequest(`--logo: ${err.message}`);
    throw err;
  }
  const etag = createHash('sha256').update(checked.data).digest('base64url').slice(0, 16);
  return { logo_type: checked.type, logo_data: checked.data, logo_etag: etag };
}

/** What the audit trail says of a logo set: its type and size, never its bytes. */
const logoDetails = (logo: Logo | null | undefined) =>
  logo ? { logo: { type: logo.type, bytes: logo.data.length } } : {};

/**
 * The upstream's own amr values the service repeats: RFC 8176 values only. A provider's word that it
 * used a second factor or a hardware key is only as good as the provider, so it is the operator's choice.
 */
function checkTrustAmr(raw: string): string {
  const values = raw.split(/[\s,]+/).filter(Boolean);
  if (values.length === 1 && values[0] === 'none') return '';
  const unknown = values.find((v) => !KNOWN_AMR.has(v));
  if (values.length === 0 || unknown !== undefined)
    throw badRequest(`--trust-amr takes RFC 8176 values (${[...KNOWN_AMR].join(', ')}) or none`);
  return [...new Set(values)].join(' ');
}

function checkLinkBy(raw: string | undefined): LinkBy {
  const value = raw ?? 'none';
  if (!(LINK_BY as readonly string[]).includes(value))
    throw badRequest(`--link-by must be one of ${LINK_BY.join(', ')}`);
  return value as LinkBy;
}

function checkNamespace(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  const value = raw.toLowerCase();
  if (!(value in SECONDARY_NAMESPACES))
    throw badRequest(`--namespace must be one of ${Object.keys(SECONDARY_NAMESPACES).join(', ')}`);
  return value;
}

/** `attribute=claim` pairs: which claim (or SAML attribute) fills which attribute of ours. */
export function parseMappings(pairs: string[] = []): Record<string, string> {
  const mappings: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    const attribute = pair.slice(0, at).trim();
    const claim = pair.slice(at + 1).trim();
    if (at < 1 || !ATTRIBUTE.test(attribute) || !CLAIM.test(claim))
      throw badRequest(`--map '${pair.slice(0, 60)}' must be <attribute>=<claim>, e.g. eppn=upn`);
    if (attribute in mappings) throw badRequest(`--map ${attribute} is given twice`);
    mappings[attribute] = claim;
  }
  return mappings;
}

function checkScopes(raw: string | undefined): string {
  const scopes = (raw ?? 'openid email profile').split(/\s+/).filter(Boolean);
  if (!scopes.includes('openid')) throw badRequest('--scopes must include openid');
  if (scopes.length > 20 || scopes.some((s) => !SCOPE.test(s))) throw badRequest('--scopes is not a list of scopes');
  return [...new Set(scopes)].join(' ');
}

function checkClientId(raw: string | undefined): string {
  const value = (raw ?? '').trim();
  if (!value || value.length > 255 || CONTROL.test(value)) throw badRequest('--client-id must be 1-255 characters');
  return value;
}

function checkSecret(secret: string): string {
  if (!secret || secret.length > 1024 || /[\r\n]/.test(secret))
    throw badRequest('the client secret must be one line of 1-1024 characters (given on standard input)');
  return secret;
}

/** The additional data of a provider's sealed client secret and private key (also used by `secret rotate`). */
export const secretAad = (id: string) => `upstream-client-secret:${id}`;
export const keyAad = (id: string) => `upstream-private-key:${id}`;

/** The SAML options given (an update leaves the ones not given as they are). */
function samlOptions(input: Pick<SamlInput, 'emailVerified' | 'requireEncryption'>): {
  saml_email_verified?: number;
  saml_require_encryption?: number;
} {
  return {
    ...(input.emailVerified !== undefined ? { saml_email_verified: input.emailVerified ? 1 : 0 } : {}),
    ...(input.requireEncryption !== undefined ? { saml_require_encryption: input.requireEncryption ? 1 : 0 } : {}),
  };
}

function newId(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(12)].map((b) => alphabet[b % 36]).join('');
}

/** The columns of a new provider of either type. */
function commonColumns(input: UpstreamInput) {
  return {
    ...(input.logo ? logoColumns(input.logo) : {}),
    link_by: checkLinkBy(input.linkBy),
    create_users: input.createUsers ? 1 : 0,
    namespace: checkNamespace(input.namespace),
    mappings: JSON.stringify(parseMappings(input.map)),
    ...(input.trustAmr !== undefined ? { trust_amr: checkTrustAmr(input.trustAmr) } : {}),
  };
}

/** The columns of a new SAML provider. */
function samlColumns(input: SamlInput): Record<string, string | number | null> {
  return {
    saml_entity_id: input.entityId,
    saml_metadata: input.metadataXml,
    saml_metadata_source: input.source ?? null,
    saml_federation_id: input.federationId ?? null,
    ...samlOptions(input),
  };
}

/**
 * The issuers a social namespace's ids come from: `google:<sub>` only from Google, and so on.
 * Another provider asserting a subject under such a namespace could claim someone else's id.
 */
const NAMESPACE_ISSUERS: Readonly<Record<string, RegExp>> = {
  google: /^https:\/\/accounts\.google\.com$/,
  microsoft: /^https:\/\/login\.microsoftonline\.com\/[0-9a-z-]+\/v2\.0$/,
  windowslive: /^https:\/\/login\.microsoftonline\.com\/9188040d-6c67-4c5b-b112-36a304b66dad\/v2\.0$/,
  apple: /^https:\/\/appleid\.apple\.com$/,
  facebook: /^https:\/\/www\.facebook\.com$/,
  linkedin: /^https:\/\/www\.linkedin\.com\/oauth$/,
};

const NAMESPACE_ISSUER_NAMES: Readonly<Record<string, string>> = {
  google: 'https://accounts.google.com',
  microsoft: 'https://login.microsoftonline.com/<tenant>/v2.0',
  windowslive: 'https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0',
  apple: 'https://appleid.apple.com',
  facebook: 'https://www.facebook.com',
  linkedin: 'https://www.linkedin.com/oauth',
};

/** A namespace the provider may assert ids in: a social one only from its own issuer. */
function checkNamespaceOwner(namespace: string | null, type: string, issuer: string | null): void {
  if (namespace === null || !(namespace in SECONDARY_NAMESPACES)) return;
  // federations: any member IdP, which speaks SAML; an OpenID Connect provider is no member
  if (namespace === 'edugain' || namespace === 'eidas') {
    if (type !== 'saml') throw badRequest(`--namespace ${namespace} is a SAML federation's: only for SAML providers`);
    return;
  }
  const pattern = NAMESPACE_ISSUERS[namespace];
  if (!pattern) throw badRequest(`--namespace ${namespace} has no OpenID Connect issuer to bind it to`);
  if (type !== 'oidc' || issuer === null || !pattern.test(issuer.replace(/\/$/, '')))
    throw badRequest(`--namespace ${namespace} is only for its own issuer (${NAMESPACE_ISSUER_NAMES[namespace]})`);
}

/** Adds a provider to the organization. */
export async function addUpstreamProvider(
  store: Store,
  keys: Keyring,
  input: UpstreamInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<UpstreamView> {
  if (!(UPSTREAM_TYPES as readonly string[]).includes(input.type))
    throw badRequest(`--type must be one of ${UPSTREAM_TYPES.join(', ')}`);
  const type = input.type as UpstreamType;
  const common = commonColumns(input);
  const id = newId();
  let oidc: Record<string, string | null> = {};
  const jwk = input.authMethod === 'private_key_jwt' ? newPrivateJwk() : undefined;
  let saml: Record<string, string | number | null> = {};
  let name: string;
  if (type === 'oidc') {
    const issuer = checkIssuer(input.issuer ?? '');
    checkNamespaceOwner(common.namespace, type, issuer);
    const authMethod = input.authMethod ?? 'client_secret_basic';
    if (!(OIDC_AUTH_METHODS as readonly string[]).includes(authMethod))
      throw badRequest(`--auth-method must be one of ${OIDC_AUTH_METHODS.join(', ')}`);
    if (authMethod !== 'private_key_jwt' && input.clientSecret === undefined)
      throw badRequest('--client-secret-stdin is required (or --auth-method private_key_jwt)');
    name = checkName(input.name, new URL(issuer).hostname);
    oidc = {
      oidc_issuer: issuer,
      oidc_client_id: checkClientId(input.clientId),
      oidc_scopes: checkScopes(input.scopes),
      oidc_auth_method: authMethod,
      oidc_client_secret:
        input.clientSecret === undefined
          ? null
          : seal(keys.upstreamSecrets, Buffer.from(checkSecret(input.clientSecret)), secretAad(id)),
      oidc_private_jwk: jwk ? seal(keys.upstreamSecrets, Buffer.from(JSON.stringify(jwk)), keyAad(id)) : null,
      oidc_public_jwk: jwk ? JSON.stringify(publicHalf(jwk)) : null,
    };
  } else {
    if (!input.saml) throw badRequest('--metadata is required for --type saml');
    checkNamespaceOwner(common.namespace, type, null);
    name = checkName(input.name, input.saml.entityId);
    saml = samlColumns(input.saml);
  }
  const federationId = input.saml?.federationId;
  return store.db.transaction().execute(async (trx) => {
    if (!(await findOrganization(trx, input.orgId))) throw notFound(`organization ${input.orgId} does not exist`);
    if (federationId !== undefined && !(await findFederation(trx, federationId)))
      throw notFound(`no federation ${federationId}`);
    await repo.insertUpstreamProvider(trx, {
      id,
      org_id: input.orgId,
      type,
      name,
      enabled: 1,
      ...common,
      ...oidc,
      ...saml,
      created_at: now,
      updated_at: now,
    });
    const bound = federationId !== undefined ? { federation: federationId, entity_id: input.saml?.entityId } : {};
    const details = { id, type, name, link_by: common.link_by, create_users: input.createUsers === true, ...bound };
    await recordAudit(trx, {
      action: 'upstream.add',
      actor,
      at: now,
      subject: `upstream:${id}`,
      orgId: input.orgId,
      details: { ...details, ...logoDetails(input.logo) },
    });
    return upstreamView(providerOf((await repo.findUpstreamProvider(trx, id))!));
  });
}

/** A P-256 key for private_key_jwt: its public half is what the upstream registers. */
function newPrivateJwk(): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' }) as Record<string, unknown>;
  return { ...jwk, kid: randomBytes(8).toString('hex'), alg: 'ES256', use: 'sig' };
}

/** The public half of a private JWK: what the upstream registers for the client. */
function publicHalf(jwk: Record<string, unknown>): Record<string, unknown> {
  const { kty, crv, x, y, kid, alg, use } = jwk;
  return { kty, crv, x, y, kid, alg, use };
}

/** Changes what may change of a provider (its type, issuer and organization stay). */
export async function updateUpstreamProvider(
  store: Store,
  keys: Keyring,
  id: string,
  changes: UpstreamChanges,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<UpstreamView> {
  const existing = await loadUpstreamRow(store, id);
  const set: Parameters<typeof repo.updateUpstreamProvider>[2] = { updated_at: now };
  if (changes.name !== undefined) set.name = checkName(changes.name, '');
  if (changes.logo !== undefined) Object.assign(set, logoColumns(changes.logo));
  if (changes.linkBy !== undefined) set.link_by = checkLinkBy(changes.linkBy);
  if (changes.createUsers !== undefined) set.create_users = changes.createUsers ? 1 : 0;
  if (changes.namespace !== undefined) {
    set.namespace = checkNamespace(changes.namespace);
    checkNamespaceOwner(set.namespace, existing.type, existing.oidc_issuer);
  }
  if (changes.map !== undefined) set.mappings = JSON.stringify(parseMappings(changes.map));
  if (changes.trustAmr !== undefined) set.trust_amr = checkTrustAmr(changes.trustAmr);
  if (existing.type === 'oidc') {
    if (changes.scopes !== undefined) set.oidc_scopes = checkScopes(changes.scopes);
    if (changes.clientId !== undefined) set.oidc_client_id = checkClientId(changes.clientId);
    if (changes.clientSecret !== undefined)
      set.oidc_client_secret = seal(
        keys.upstreamSecrets,
        Buffer.from(checkSecret(changes.clientSecret)),
        secretAad(id),
      );
  } else if (changes.scopes !== undefined || changes.clientSecret !== undefined || changes.clientId !== undefined) {
    throw badRequest('--scopes, --client-id and the client secret are for OpenID Connect providers');
  }
  if (changes.samlOptions !== undefined) {
    if (existing.type !== 'saml') throw badRequest('--email-verified and --require-encryption are for SAML providers');
    Object.assign(set, samlOptions(changes.samlOptions));
  }
  if (changes.saml !== undefined) {
    if (existing.type !== 'saml') throw badRequest('--metadata is for SAML providers');
    if (existing.saml_federation_id !== null)
      throw badRequest(
        `the metadata of this provider comes from federation ${Number(existing.saml_federation_id)} and is kept current by its refresh (saml federation refresh)`,
      );
    // The links hold this IdP's subjects: another IdP's NameIDs must never be matched against them.
    if (changes.saml.entityId !== existing.saml_entity_id)
      throw badRequest(
        `the new metadata is for another identity provider (${changes.saml.entityId.slice(0, 200)}); add it as a new provider`,
      );
    set.saml_entity_id = changes.saml.entityId;
    set.saml_metadata = changes.saml.metadataXml;
    set.saml_metadata_source = changes.saml.source ?? null;
    Object.assign(set, samlOptions(changes.saml));
  }
  return store.db.transaction().execute(async (trx) => {
    await repo.updateUpstreamProvider(trx, id, set);
    const fields = [
      ...new Set(
        Object.keys(set)
          .filter((k) => k !== 'updated_at')
          .map((k) => (k === 'oidc_client_secret' ? 'client_secret' : k.startsWith('logo_') ? 'logo' : k)),
      ),
    ].sort();
    await recordAudit(trx, {
      action: 'upstream.update',
      actor,
      at: now,
      subject: `upstream:${id}`,
      orgId: Number(existing.org_id),
      details: { id, fields, ...logoDetails(changes.logo) },
    });
    return upstreamView(providerOf((await repo.findUpstreamProvider(trx, id))!));
  });
}

/** Turns sign-in through the provider off or on; off takes effect at the next step of any sign-in under way. */
export async function setUpstreamEnabled(
  store: Store,
  id: string,
  enabled: boolean,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<UpstreamView> {
  const existing = await loadUpstreamRow(store, id);
  return store.db.transaction().execute(async (trx) => {
    await repo.updateUpstreamProvider(trx, id, { enabled: enabled ? 1 : 0, updated_at: now });
    await recordAudit(trx, {
      action: enabled ? 'upstream.enable' : 'upstream.disable',
      actor,
      at: now,
      subject: `upstream:${id}`,
      orgId: Number(existing.org_id),
      details: { id },
    });
    return upstreamView(providerOf((await repo.findUpstreamProvider(trx, id))!));
  });
}

/** Removes the provider and its links; the accounts stay. */
export async function removeUpstreamProvider(
  store: Store,
  id: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ id: string; name: string; links: number }> {
  const existing = await loadUpstreamRow(store, id);
  return store.db.transaction().execute(async (trx) => {
    const links = await repo.deleteUpstreamProvider(trx, id);
    await recordAudit(trx, {
      action: 'upstream.remove',
      actor,
      at: now,
      subject: `upstream:${id}`,
      orgId: Number(existing.org_id),
      details: { id, name: existing.name, links },
    });
    return { id, name: existing.name, links };
  });
}

async function loadUpstreamRow(store: Store, id: string): Promise<repo.UpstreamProviderRow> {
  const row = PROVIDER_ID.test(id) ? await repo.findUpstreamProvider(store.db, id) : undefined;
  if (!row) throw notFound(`upstream provider '${String(id).slice(0, 40)}' does not exist`);
  return row;
}

export async function loadUpstreamProvider(store: Store, id: string): Promise<UpstreamProvider> {
  return providerOf(await loadUpstreamRow(store, id));
}

/** The provider, when the id names one (undefined otherwise: a page says it is unknown). */
export async function findUpstreamProvider(store: Store, id: string): Promise<UpstreamProvider | undefined> {
  if (!PROVIDER_ID.test(id)) return undefined;
  const row = await repo.findUpstreamProvider(store.db, id);
  return row ? providerOf(row) : undefined;
}

export async function listUpstreamProviders(store: Store, orgId?: number): Promise<UpstreamView[]> {
  if (orgId !== undefined && !(await findOrganization(store.db, orgId)))
    throw notFound(`organization ${orgId} does not exist`);
  return (await repo.listUpstreamProviders(store.db, orgId)).map((r) => upstreamView(providerOf(r)));
}

/** The organization's enabled providers, for its sign-in page. */
export async function enabledProvidersOf(store: Store, orgId: number): Promise<UpstreamProvider[]> {
  return (await repo.listUpstreamProviders(store.db, orgId)).filter((r) => r.enabled === 1).map(providerOf);
}

export function providerOf(row: repo.UpstreamProviderRow): UpstreamProvider {
  const provider: UpstreamProvider = {
    id: row.id,
    orgId: Number(row.org_id),
    type: row.type as UpstreamType,
    name: row.name,
    enabled: row.enabled === 1,
    linkBy: row.link_by as LinkBy,
    createUsers: row.create_users === 1,
    mappings: JSON.parse(row.mappings) as Record<string, string>,
    trustAmr: row.trust_amr.split(' ').filter(Boolean),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
  if (row.logo_type && row.logo_etag && row.logo_bytes !== null)
    provider.logo = { type: row.logo_type, bytes: Number(row.logo_bytes), etag: row.logo_etag };
  if (row.namespace) provider.namespace = row.namespace;
  if (row.type === 'oidc') {
    provider.oidc = {
      issuer: row.oidc_issuer ?? '',
      clientId: row.oidc_client_id ?? '',
      hasClientSecret: row.oidc_client_secret !== null,
      scopes: (row.oidc_scopes ?? 'openid').split(' '),
      authMethod: (row.oidc_auth_method ?? 'client_secret_basic') as OidcAuthMethod,
    };
    if (row.oidc_public_jwk) provider.oidc.publicJwk = JSON.parse(row.oidc_public_jwk) as Record<string, unknown>;
  }
  if (row.type === 'saml')
    provider.saml = {
      entityId: row.saml_entity_id ?? '',
      metadataXml: row.saml_metadata ?? '',
      ...(row.saml_metadata_source ? { metadataSource: row.saml_metadata_source } : {}),
      ...(row.saml_federation_id !== null ? { federationId: Number(row.saml_federation_id) } : {}),
      ...(row.saml_federation_missing_since !== null
        ? {
            federationMissing: {
              since: Number(row.saml_federation_missing_since),
              reason: row.saml_federation_missing_reason ?? '',
            },
          }
        : {}),
      emailVerified: row.saml_email_verified === 1,
      requireEncryption: row.saml_require_encryption === 1,
    };
  return provider;
}

/** What only sign-in needs of a provider: its client secret or private key, opened. */
export interface OidcCredentials {
  clientSecret?: string;
  privateJwk?: Record<string, unknown>;
}

export async function oidcCredentials(store: Store, keys: Keyring, id: string): Promise<OidcCredentials> {
  const row = await loadUpstreamRow(store, id);
  const out: OidcCredentials = {};
  if (row.oidc_client_secret) {
    const secret = open(keys.upstreamSecrets, row.oidc_client_secret, secretAad(id));
    if (secret) out.clientSecret = secret.toString('utf8');
  }
  if (row.oidc_private_jwk) {
    const jwk = open(keys.upstreamSecrets, row.oidc_private_jwk, keyAad(id));
    if (jwk) out.privateJwk = JSON.parse(jwk.toString('utf8')) as Record<string, unknown>;
  }
  return out;
}

export interface UpstreamView extends Record<string, unknown> {
  id: string;
  org_id: number;
  type: UpstreamType;
  name: string;
  enabled: boolean;
}

/** What an operator sees of a provider: never its client secret or private key. */
export function upstreamView(p: UpstreamProvider): UpstreamView {
  return {
    id: p.id,
    org_id: p.orgId,
    type: p.type,
    name: p.name,
    logo: p.logo ? { type: p.logo.type, bytes: p.logo.bytes } : null,
    enabled: p.enabled,
    link_by: p.linkBy,
    create_users: p.createUsers,
    namespace: p.namespace ?? null,
    mappings: p.mappings,
    trust_amr: p.trustAmr,
    ...(p.oidc
      ? {
          issuer: p.oidc.issuer,
          client_id: p.oidc.clientId,
          client_secret: p.oidc.hasClientSecret ? 'set' : 'none',
          scopes: p.oidc.scopes.join(' '),
          auth_method: p.oidc.authMethod,
          ...(p.oidc.publicJwk ? { public_jwk: p.oidc.publicJwk } : {}),
        }
      : {}),
    ...(p.saml
      ? {
          entity_id: p.saml.entityId,
          metadata_source: p.saml.metadataSource ?? null,
          federation_id: p.saml.federationId ?? null,
          ...(p.saml.federationMissing
            ? {
                federation_missing_since: iso(p.saml.federationMissing.since),
                federation_missing_reason: p.saml.federationMissing.reason,
              }
            : {}),
          email_verified: p.saml.emailVerified,
          require_encryption: p.saml.requireEncryption,
        }
      : {}),
    created_at: iso(p.createdAt),
    updated_at: iso(p.updatedAt),
  };
}

/** The path of a provider's logo at its current version (a changed logo has another URL). */
export function upstreamLogoPath(provider: UpstreamProvider): string | undefined {
  return provider.logo && `/upstream/${provider.id}/logo?v=${encodeURIComponent(provider.logo.etag)}`;
}

/** The logo of an enabled provider, to serve it (undefined: no such provider, disabled, or no logo). */
export async function enabledProviderLogo(
  store: Store,
  id: string,
): Promise<{ type: string; data: Buffer; etag: string } | undefined> {
  if (!PROVIDER_ID.test(id)) return undefined;
  return repo.findEnabledProviderLogo(store.db, id);
}
