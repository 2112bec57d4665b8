// The SAML service provider registry. Each SP is paired with a row in `clients` (protocol 'saml')
// so that one sign-in serves both protocols: the SP gets the consent page, consent storage, session
// participation and audit of an OpenID Connect client. Every change here changes both rows in one
// transaction with its audit record, and publishes invalidations so every instance sees it at once.
import type { Insertable, Transaction } from 'kysely';
import type { Store } from '../store/index.ts';
import type { ClientsTable, DB } from '../store/schema.ts';
import * as clients from '../store/clients.ts';
import * as repo from '../store/saml.ts';
import { deletePersistentIdsOfEntity, deleteSessionSpsOfEntity } from '../store/saml-sso.ts';
import { isUniqueViolation } from '../store/index.ts';
import { deleteClientArtifacts } from '../store/oidc-payloads.ts';
import { keptLookup, publish } from '../store/invalidation.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { checkGroups } from '../clients/index.ts';
import type { AttributeGroup } from '../vocabulary.ts';
import { parseSpMetadata, type SpDescriptor } from '../saml/metadata/index.ts';
import { serviceProviderClientId } from './client-id.ts';
import {
  findFederatedServiceProvider,
  findFederatedServiceProviderByClientId,
  type FederatedServiceProvider,
} from './federated-providers.ts';
import { NAMEID_FORMAT } from '../saml/metadata/index.ts';

export const NAMEID_CHOICES = ['persistent', 'transient', 'email', 'none'] as const;
export const ENCRYPT_CHOICES = ['auto', 'always', 'never'] as const;
export const SIGN_CHOICES = ['response', 'assertion', 'both'] as const;
export type NameIdChoice = (typeof NAMEID_CHOICES)[number];
export type EncryptChoice = (typeof ENCRYPT_CHOICES)[number];
export type SignChoice = (typeof SIGN_CHOICES)[number];

export { SAML_CONTINUE_PATH } from './paths.ts';

export interface ServiceProvider {
  entityId: string;
  clientId: string;
  name: string;
  groups: AttributeGroup[];
  firstParty: boolean;
  nameId: NameIdChoice;
  encrypt: EncryptChoice;
  sign: SignChoice;
  allowUnsolicited: boolean;
  disabled: boolean;
  federationId: string | null;
  descriptor: SpDescriptor;
  /**
   * A federation SP only: the SAML attribute names its entity categories release (entity-categories.ts).
   * The attribute statement keeps only these of what `groups` would release. Undefined for a registered SP.
   */
  releasedAttributes?: string[];
  /**
   * A federation SP only: its federation requires signed AuthnRequests (`saml federation add
   * --require-signed-requests`), whatever its metadata's AuthnRequestsSigned says.
   */
  requireSignedRequests?: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface ServiceProviderSettings {
  name?: string;
  groups?: string[];
  firstParty?: boolean;
  nameId?: string;
  encrypt?: string;
  sign?: string;
  allowUnsolicited?: boolean;
}

export interface NewServiceProvider extends ServiceProviderSettings {
  /** the SP's metadata document (one EntityDescriptor) */
  metadata: string | Buffer;
}

export interface ServiceProviderUpdate extends ServiceProviderSettings {
  /** new metadata of the same entityID (new keys, new endpoints) */
  metadata?: string | Buffer;
}

function toServiceProvider(row: repo.ServiceProviderRow): ServiceProvider {
  return {
    entityId: row.entity_id,
    clientId: row.client_id,
    name: row.name,
    groups: row.groups.split(' ').filter(Boolean) as AttributeGroup[],
    firstParty: row.first_party === 1,
    nameId: row.name_id as NameIdChoice,
    encrypt: row.encrypt as EncryptChoice,
    sign: row.sign as SignChoice,
    allowUnsolicited: row.allow_unsolicited === 1,
    disabled: row.disabled_at !== null,
    federationId: row.federation_id,
    descriptor: JSON.parse(row.descriptor) as SpDescriptor,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * A service provider of a trusted federation, as the SSO sees every SP: never first party (the
 * consent page is shown), a transient NameID unless its metadata lists persistent first, encrypted
 * when it publishes a key, signed assertions, and the attribute groups of its entity categories.
 */
function federatedToServiceProvider(found: FederatedServiceProvider, blocked: boolean): ServiceProvider {
  const { descriptor } = found;
  return {
    entityId: descriptor.entityId,
    clientId: serviceProviderClientId(descriptor.entityId),
    name: (descriptor.displayName ?? descriptor.entityId).slice(0, 200),
    groups: found.groups,
    firstParty: false,
    nameId: descriptor.nameIdFormats[0] === NAMEID_FORMAT.persistent ? 'persistent' : 'transient',
    encrypt: 'auto',
    sign: 'assertion',
    allowUnsolicited: false,
    disabled: blocked,
    federationId: found.federationId,
    descriptor,
    releasedAttributes: found.releasedAttributes,
    requireSignedRequests: found.requireSignedRequests,
    createdAt: 0,
    updatedAt: 0,
  };
}

// Every SAML request looks its SP up (an SSO twice: the request, then the continuation after the
// sign-in). A registered SP is kept until it changes: every change publishes a 'service-provider'
// invalidation in its transaction (publishBoth). Unknown entityIDs and federation SPs are not kept
// here (an Issuer is the sender's to choose; an aggregate is its own cache).
const SP_KEEP_MS = 60_000;
const SP_CACHE_ENTRIES = 1000;

type RegisteredLookup = (entityId: string) => Promise<ServiceProvider | undefined>;
const spCaches = new WeakMap<Store, RegisteredLookup>();

/** A registered (not federated) SP, kept or from the database; concurrent lookups share one query. */
function registeredServiceProvider(store: Store, entityId: string): Promise<ServiceProvider | undefined> {
  let lookup = spCaches.get(store);
  if (!lookup) {
    lookup = keptLookup(store.invalidations, {
      topic: 'service-provider',
      max: SP_CACHE_ENTRIES,
      keepMs: SP_KEEP_MS,
      load: async (key) => {
        const row = await repo.findServiceProviderRow(store.db, key);
        return row && toServiceProvider(row);
      },
    });
    spCaches.set(store, lookup);
  }
  return lookup(entityId);
}

/**
 * The SP registered under this entityID, enabled or not (the caller refuses a disabled one); else
 * one of a trusted federation whose metadata is in force (federated-providers.ts). A registered SP
 * is the cache's object, shared by every caller: not to be changed.
 */
export async function findServiceProvider(store: Store, entityId: string): Promise<ServiceProvider | undefined> {
  if (typeof entityId !== 'string' || entityId.length === 0 || entityId.length > 1024) return undefined;
  const registered = await registeredServiceProvider(store, entityId);
  if (registered) return registered;
  const federated = await findFederatedServiceProvider(store, entityId);
  return federated && withBlock(store, federated);
}

/** A federation SP as the SSO sees it: disabled while an operator blocks it (`saml sp disable`). */
async function withBlock(store: Store, found: FederatedServiceProvider): Promise<ServiceProvider> {
  const blockedAt = await repo.serviceProviderBlockedAt(store.db, found.descriptor.entityId);
  return federatedToServiceProvider(found, blockedAt !== undefined);
}

export async function findServiceProviderByClientId(
  store: Store,
  clientId: string,
): Promise<ServiceProvider | undefined> {
  if (typeof clientId !== 'string' || !clientId.startsWith('saml-') || clientId.length > 64) return undefined;
  const row = await repo.findServiceProviderRowByClientId(store.db, clientId);
  if (row) return toServiceProvider(row);
  const federated = await findFederatedServiceProviderByClientId(store, clientId);
  return federated && withBlock(store, federated);
}

export async function getServiceProvider(store: Store, entityId: string): Promise<ServiceProvider> {
  const sp = await findServiceProvider(store, entityId);
  if (!sp) throw notFound(`service provider '${entityId}' is not registered`);
  return sp;
}

export async function listServiceProviders(store: Store): Promise<ServiceProvider[]> {
  return (await repo.listServiceProviderRows(store.db)).map(toServiceProvider);
}

/** The registered metadata document of an SP, as it was given. */
export async function serviceProviderMetadata(store: Store, entityId: string): Promise<string> {
  const row = await repo.findServiceProviderRow(store.db, entityId);
  if (!row) throw notFound(`service provider '${entityId}' is not registered`);
  return row.metadata;
}

function choice<T extends string>(value: string, allowed: readonly T[], option: string): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw badRequest(`${option} must be one of ${allowed.join(', ')}, not '${value.slice(0, 50)}'`);
  }
  return value as T;
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 200 || /[\u0000-\u001f\u007f]/.test(trimmed)) {
    throw badRequest('the service provider name must be 1-200 characters without control characters');
  }
  return trimmed;
}

/** What a new SP is called: --name, else its mdui:DisplayName or Organization, else its entityID. */
function defaultName(descriptor: SpDescriptor): string {
  const name = (descriptor.displayName ?? descriptor.entityId).slice(0, 200);
  return name.replace(/[\u0000-\u001f\u007f]/g, ' ').trim() || descriptor.entityId.slice(0, 200);
}

/** What the SP's metadata asks for that a setting would deny it. */
function checkSettings(sp: ServiceProvider): void {
  checkEncryption(sp.encrypt, sp.descriptor);
  if (sp.sign === 'response' && sp.descriptor.wantAssertionsSigned) {
    throw badRequest(
      `the metadata of ${sp.entityId} says WantAssertionsSigned: --sign response would not sign them; use assertion or both`,
    );
  }
}

/** --encrypt always needs a key to encrypt to. */
function checkEncryption(encrypt: EncryptChoice, descriptor: SpDescriptor): void {
  if (encrypt === 'always' && descriptor.encryptionCertificates.length === 0) {
    throw badRequest(
      `--encrypt always needs an encryption key, and the metadata of ${descriptor.entityId} publishes none`,
    );
  }
}

type Columns = Omit<repo.ServiceProviderRow, 'entity_id' | 'client_id' | 'created_at' | 'federation_id'>;

function columns(
  sp: Omit<ServiceProvider, 'entityId' | 'clientId' | 'createdAt' | 'updatedAt' | 'federationId'>,
  metadata: string,
  now: number,
  disabledAt: number | null,
): Columns {
  return {
    name: sp.name,
    groups: sp.groups.join(' '),
    first_party: sp.firstParty ? 1 : 0,
    name_id: sp.nameId,
    encrypt: sp.encrypt,
    sign: sp.sign,
    allow_unsolicited: sp.allowUnsolicited ? 1 : 0,
    disabled_at: disabledAt,
    metadata,
    descriptor: JSON.stringify(sp.descriptor),
    updated_at: now,
  };
}

/** The paired client's row: a public sign-in client (PKCE) whose redirect URI the adapter computes from PUBLIC_URL. */
function clientRow(sp: ServiceProvider, now: number): Insertable<ClientsTable> {
  return {
    client_id: sp.clientId,
    secret_hash: null,
    name: sp.name,
    redirect_uris: '[]',
    post_logout_redirect_uris: '[]',
    backchannel_logout_uri: null,
    frontchannel_logout_uri: null,
    grant_types: JSON.stringify(['authorization_code']),
    scopes: '',
    groups: sp.groups.join(' '),
    first_party: sp.firstParty ? 1 : 0,
    userinfo_signed_response_alg: null,
    require_par: 0,
    protocol: 'saml',
    disabled_at: sp.disabled ? now : null,
    created_at: now,
    updated_at: now,
  };
}

function auditDetails(sp: ServiceProvider): Record<string, unknown> {
  return {
    entity_id: sp.entityId,
    name: sp.name,
    groups: sp.groups,
    first_party: sp.firstParty,
    nameid: sp.nameId,
    encrypt: sp.encrypt,
    sign: sp.sign,
    allow_unsolicited: sp.allowUnsolicited,
  };
}

async function publishBoth(trx: Transaction<DB>, sp: { entityId: string; clientId: string }): Promise<void> {
  await publish(trx, 'client', sp.clientId);
  await publish(trx, 'service-provider', sp.entityId);
}

/**
 * Registers an SP from its metadata. Defaults: persistent NameID, encryption when the SP publishes
 * an encryption key, signed assertions (what mod_auth_mellon and Shibboleth SP check by default).
 */
export async function addServiceProvider(
  store: Store,
  input: NewServiceProvider,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<ServiceProvider> {
  const descriptor = await parseSpMetadata(input.metadata, { now });
  const sp: ServiceProvider = {
    entityId: descriptor.entityId,
    clientId: serviceProviderClientId(descriptor.entityId),
    name: input.name !== undefined ? checkName(input.name) : defaultName(descriptor),
    groups: checkGroups(input.groups ?? []) as AttributeGroup[],
    firstParty: Boolean(input.firstParty),
    nameId: choice(input.nameId ?? 'persistent', NAMEID_CHOICES, '--nameid'),
    encrypt: choice(input.encrypt ?? 'auto', ENCRYPT_CHOICES, '--encrypt'),
    sign: choice(input.sign ?? 'assertion', SIGN_CHOICES, '--sign'),
    allowUnsolicited: Boolean(input.allowUnsolicited),
    disabled: false,
    federationId: null,
    descriptor,
    createdAt: now,
    updatedAt: now,
  };
  checkSettings(sp);
  const metadata = Buffer.isBuffer(input.metadata) ? input.metadata.toString('utf8') : input.metadata;
  try {
    await insertServiceProvider(store, sp, metadata, actor, now);
  } catch (err) {
    // Two registrations of one entityID at once on PostgreSQL: both found none, the second insert
    // waits for the first to commit and then violates the primary key. It is the same conflict.
    if (isUniqueViolation(err)) throw alreadyRegistered(sp.entityId);
    throw err;
  }
  return sp;
}

const alreadyRegistered = (entityId: string) =>
  conflict(`service provider '${entityId}' is already registered (change it with saml sp update)`);

async function insertServiceProvider(
  store: Store,
  sp: ServiceProvider,
  metadata: string,
  actor: Actor,
  now: number,
): Promise<void> {
  await store.db.transaction().execute(async (trx) => {
    if (await repo.findServiceProviderRow(trx, sp.entityId)) throw alreadyRegistered(sp.entityId);
    if (await clients.findClient(trx, sp.clientId)) {
      // PostgreSQL: a registration of the same entityID committed since the first look
      if (await repo.findServiceProviderRow(trx, sp.entityId)) throw alreadyRegistered(sp.entityId);
      throw conflict(`a client with the id '${sp.clientId}' already exists`);
    }
    await repo.insertServiceProvider(trx, {
      entity_id: sp.entityId,
      client_id: sp.clientId,
      federation_id: null,
      created_at: now,
      ...columns(sp, metadata, now, null),
    });
    await clients.insertClient(trx, clientRow(sp, now));
    await publishBoth(trx, sp);
    await recordAudit(trx, {
      action: 'sp.add',
      actor,
      at: now,
      subject: sp.entityId,
      clientId: sp.clientId,
      details: auditDetails(sp),
    });
  });
}

/** How the audit record names each setting. */
const FIELD_NAMES: Record<string, string> = {
  firstParty: 'first_party',
  nameId: 'nameid',
  allowUnsolicited: 'allow_unsolicited',
};

/** The SP with the update applied (checked), and the fields that changed. */
function applyUpdate(
  current: ServiceProvider,
  currentMetadata: string,
  input: ServiceProviderUpdate,
  descriptor: SpDescriptor | undefined,
  now: number,
): { next: ServiceProvider; metadata: string; fields: string[] } {
  const next: ServiceProvider = { ...current, updatedAt: now };
  let metadata = currentMetadata;
  const fields: string[] = [];
  if (input.metadata !== undefined && descriptor) {
    if (descriptor.entityId !== current.entityId) {
      throw badRequest(`the metadata is for '${descriptor.entityId}', not '${current.entityId}'`);
    }
    next.descriptor = descriptor;
    metadata = Buffer.isBuffer(input.metadata) ? input.metadata.toString('utf8') : input.metadata;
    fields.push('metadata');
  }
  const settings: Partial<ServiceProvider> = {
    ...(input.name !== undefined && { name: checkName(input.name) }),
    ...(input.groups !== undefined && { groups: checkGroups(input.groups) as AttributeGroup[] }),
    ...(input.firstParty !== undefined && { firstParty: input.firstParty }),
    ...(input.nameId !== undefined && { nameId: choice(input.nameId, NAMEID_CHOICES, '--nameid') }),
    ...(input.encrypt !== undefined && { encrypt: choice(input.encrypt, ENCRYPT_CHOICES, '--encrypt') }),
    ...(input.sign !== undefined && { sign: choice(input.sign, SIGN_CHOICES, '--sign') }),
    ...(input.allowUnsolicited !== undefined && { allowUnsolicited: input.allowUnsolicited }),
  };
  Object.assign(next, settings);
  fields.push(...Object.keys(settings).map((key) => FIELD_NAMES[key] ?? key));
  if (fields.length === 0) {
    throw badRequest(
      'nothing to change: give --metadata, --name, --groups, --first-party, --nameid, --encrypt, --sign or --allow-unsolicited',
    );
  }
  checkSettings(next);
  return { next, metadata, fields };
}

/** Changes an SP's registration (and its client's name, groups and first-party flag). */
export async function updateServiceProvider(
  store: Store,
  entityId: string,
  input: ServiceProviderUpdate,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<ServiceProvider> {
  // Read (and schema-validated) before the transaction, which then holds its lock only briefly.
  const descriptor = input.metadata === undefined ? undefined : await parseSpMetadata(input.metadata, { now });
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findServiceProviderRow(trx, entityId);
    if (!row) throw notFound(`service provider '${entityId}' is not registered`);
    const { next, metadata, fields } = applyUpdate(toServiceProvider(row), row.metadata, input, descriptor, now);
    await repo.updateServiceProviderRow(trx, entityId, columns(next, metadata, now, row.disabled_at));
    await clients.updateClient(trx, next.clientId, {
      name: next.name,
      groups: next.groups.join(' '),
      first_party: next.firstParty ? 1 : 0,
      updated_at: now,
    });
    await publishBoth(trx, next);
    await recordAudit(trx, {
      action: 'sp.update',
      actor,
      at: now,
      subject: entityId,
      clientId: next.clientId,
      details: { entity_id: entityId, fields },
    });
    return next;
  });
}

/**
 * Disables or re-enables an SP and its client. Disabled, the SP is refused at once on every
 * instance, its client's grants and tokens are deleted as `client disable` deletes them, and the
 * sessions it received assertions in are forgotten for it (saml_session_sps), so no session's
 * authorization of it lets a sign-in through; re-enabling brings none of them back. Users' consents
 * and persistent NameIDs are kept, as `client disable` keeps consents: enabling gives the same SP
 * back. An SP known only from a trusted federation is blocked instead (saml_sp_blocks), which
 * outlives the aggregate's refreshes until it is enabled again.
 */
export async function setServiceProviderEnabled(
  store: Store,
  entityId: string,
  enabled: boolean,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ serviceProvider: ServiceProvider | undefined; changed: boolean }> {
  const registered = await repo.findServiceProviderRow(store.db, entityId);
  const changed = registered
    ? await setRegisteredEnabled(store, entityId, enabled, actor, now)
    : await setFederatedEnabled(store, entityId, enabled, actor, now);
  return { serviceProvider: await findServiceProvider(store, entityId), changed };
}

function setRegisteredEnabled(store: Store, entityId: string, enabled: boolean, actor: Actor, now: number) {
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findServiceProviderRow(trx, entityId);
    if (!row) throw notFound(`service provider '${entityId}' is not registered`);
    if ((row.disabled_at === null) === enabled) return false;
    const disabledAt = enabled ? null : now;
    await repo.updateServiceProviderRow(trx, entityId, { disabled_at: disabledAt, updated_at: now });
    await clients.updateClient(trx, row.client_id, { disabled_at: disabledAt, updated_at: now });
    await publishBoth(trx, { entityId, clientId: row.client_id });
    const ended = enabled ? undefined : await endClientUse(trx, store, entityId, row.client_id);
    await recordAudit(trx, {
      action: enabled ? 'sp.enable' : 'sp.disable',
      actor,
      at: now,
      subject: entityId,
      clientId: row.client_id,
      details: { entity_id: entityId, ...ended },
    });
    return true;
  });
}

/** What a disabled or removed SP's client had: its grants and tokens, and the sessions' SAML sign-ins to it. */
async function endClientUse(trx: Transaction<DB>, store: Store, entityId: string, clientId: string) {
  const artifacts = await deleteClientArtifacts(trx, clientId, store.dialect);
  const sessions = await deleteSessionSpsOfEntity(trx, entityId);
  return { artifacts, sessions };
}

/** Blocks (or unblocks) an SP of a trusted federation; its client, if it has signed anyone in, follows. */
async function setFederatedEnabled(store: Store, entityId: string, enabled: boolean, actor: Actor, now: number) {
  const federated = await findFederatedServiceProvider(store, entityId, now);
  return store.db.transaction().execute(async (trx) => {
    const blocked = (await repo.serviceProviderBlockedAt(trx, entityId)) !== undefined;
    if (!federated && !blocked) {
      throw notFound(`service provider '${entityId}' is neither registered nor in a trusted federation`);
    }
    if (blocked !== enabled) return false;
    if (enabled) await repo.deleteServiceProviderBlock(trx, entityId);
    else await repo.insertServiceProviderBlock(trx, entityId, now);
    const clientId = serviceProviderClientId(entityId);
    const client = await clients.findClient(trx, clientId);
    if (client?.protocol === 'saml')
      await clients.updateClient(trx, clientId, { disabled_at: enabled ? null : now, updated_at: now });
    await publishBoth(trx, { entityId, clientId });
    const ended = enabled ? undefined : await endClientUse(trx, store, entityId, clientId);
    await recordAudit(trx, {
      action: enabled ? 'sp.enable' : 'sp.disable',
      actor,
      at: now,
      subject: entityId,
      clientId,
      details: { entity_id: entityId, federation_id: federated?.federationId ?? null, ...ended },
    });
    return true;
  });
}

/**
 * Removes an SP with its client, the client's grants and tokens, users' consents to it (they go
 * with the client), the sessions' record of sign-ins to it and every user's persistent NameID at
 * it: an SP added again later starts afresh, with new NameIDs.
 */
export async function removeServiceProvider(
  store: Store,
  entityId: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ artifacts: number }> {
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findServiceProviderRow(trx, entityId);
    if (!row) throw notFound(`service provider '${entityId}' is not registered`);
    const { artifacts, sessions } = await endClientUse(trx, store, entityId, row.client_id);
    const nameIds = await deletePersistentIdsOfEntity(trx, entityId);
    await repo.deleteServiceProviderRow(trx, entityId);
    // users' consents reference the client (on delete cascade)
    await clients.deleteClient(trx, row.client_id);
    await publishBoth(trx, { entityId, clientId: row.client_id });
    await recordAudit(trx, {
      action: 'sp.remove',
      actor,
      at: now,
      subject: entityId,
      clientId: row.client_id,
      details: { entity_id: entityId, name: row.name, artifacts, sessions, persistent_ids: nameIds },
    });
    return { artifacts };
  });
}

/**
 * Makes sure the SP's client row exists and matches it (name, groups, first party, enabled): an SP
 * of a federation aggregate has none until its first sign-in. Idempotent; safe when instances race.
 * Each change is audited (`sp.client`, by the system) in its transaction.
 */
export async function ensureServiceProviderClient(store: Store, sp: ServiceProvider, now = Date.now()): Promise<void> {
  const existing = await clients.findClient(store.db, sp.clientId);
  if (existing && matches(existing, sp)) return;
  await store.db.transaction().execute(async (trx) => {
    const row = await clients.findClient(trx, sp.clientId);
    if (row && row.protocol !== 'saml') throw conflict(`a client with the id '${sp.clientId}' already exists`);
    if (row && matches(row, sp)) return;
    if (row) {
      await clients.updateClient(trx, sp.clientId, {
        name: sp.name,
        groups: sp.groups.join(' '),
        first_party: sp.firstParty ? 1 : 0,
        disabled_at: sp.disabled ? (row.disabled_at ?? now) : null,
        updated_at: now,
      });
    } else if (!(await clients.insertClientIfAbsent(trx, clientRow(sp, now)))) {
      return;
    }
    await publish(trx, 'client', sp.clientId);
    await recordAudit(trx, {
      action: 'sp.client',
      actor: SYSTEM,
      at: now,
      subject: sp.entityId,
      clientId: sp.clientId,
      details: {
        entity_id: sp.entityId,
        federation_id: sp.federationId,
        created: row === undefined,
        name: sp.name,
        groups: sp.groups,
        disabled: sp.disabled,
      },
    });
  });
}

function matches(row: clients.ClientRow, sp: ServiceProvider): boolean {
  return (
    row.protocol === 'saml' &&
    row.name === sp.name &&
    row.groups === sp.groups.join(' ') &&
    row.first_party === (sp.firstParty ? 1 : 0) &&
    (row.disabled_at !== null) === sp.disabled
  );
}
