// Kysely table types. Timestamps are epoch milliseconds (UTC) in both dialects; booleans are 0/1.
import type { ColumnType, Generated } from 'kysely';

/** A column added later, with a default: inserts may leave it out. */
type Later<T> = ColumnType<T, T | undefined, T>;

export interface OrganizationsTable {
  id: number;
  realm: string;
  name: string;
  created_at: number;
  /** JSON object: the organization's branding (name, logo, colours, links), over the deployment's */
  branding: Later<string | null>;
  /** JSON object: the organization's authenticator policy (src/webauthn/policy.ts); null: defaults */
  passkey_policy: Later<string | null>;
  /** set while the organization is disabled: none of its users signs in or uses a token (migration 034) */
  disabled_at: Later<number | null>;
}

export interface UsersTable {
  id: Generated<number>;
  sub: string;
  org_id: number;
  eppn: string;
  name: string;
  email: string | null;
  nin: string | null;
  password_hash: string | null;
  photo_handle: string | null;
  created_at: number;
  updated_at: number;
  /** shown by the account pages and given to authenticators; null: the name */
  display_name: Later<string | null>;
  email_verified: Later<number>;
  /** SCIM `emails[].primary` as the directory last sent it (1/0); null: not said, read as primary (migration 016) */
  email_primary: Later<number | null>;
  /** set while the user is disabled: no sign-in, no tokens */
  disabled_at: Later<number | null>;
  /** the directory's own id of the user (SCIM externalId), unique in the organization (migration 011) */
  external_id: Later<string | null>;
  given_name: Later<string | null>;
  family_name: Later<string | null>;
  /** eduPersonAffiliation values, space-separated */
  affiliation: Later<string | null>;
  primary_affiliation: Later<string | null>;
  org_unit: Later<string | null>;
  title: Later<string | null>;
  employee_number: Later<string | null>;
  student_number: Later<string | null>;
  /** eduPersonEntitlement URIs, space-separated */
  entitlement: Later<string | null>;
  /** counted up to end every console session of the user (migration 013) */
  console_generation: Later<number>;
  /** en or nb: the language of the user's e-mail (migration 022); null: not known */
  language: Later<string | null>;
  /** the user's passkeys, kept by triggers on passkeys (migration 010): never written directly */
  passkey_count: ColumnType<number, never, never>;
  /** the first successful sign-in (migration 024), for the adoption funnel */
  first_sign_in_at: Later<number | null>;
}

export interface UserIdsTable {
  user_id: number;
  namespace: string;
  identifier: string;
}

export interface ClientsTable {
  client_id: string;
  secret_hash: string | null;
  name: string;
  redirect_uris: string; // JSON array
  post_logout_redirect_uris: string; // JSON array
  grant_types: string; // JSON array
  scopes: string; // space separated
  groups: string; // space separated attribute groups
  first_party: number;
  userinfo_signed_response_alg: string | null;
  /** 1: authorization requests must be pushed (RFC 9126) */
  require_par: number;
  backchannel_logout_uri: string | null;
  frontchannel_logout_uri: string | null;
  created_at: number;
  updated_at: number;
  /** set while the client is disabled: unknown to the authorization server, its tokens refused */
  disabled_at: Later<number | null>;
  /** the secret before the last rotation, accepted until previous_secret_expires_at */
  previous_secret_hash: Later<string | null>;
  previous_secret_expires_at: Later<number | null>;
  /** 1: a resource server that may introspect the tokens of its organizations' users (docs/tokens.md) */
  introspection: Later<number>;
  /** 'oidc' | 'saml': a 'saml' client is a SAML service provider's, changed through it only (migration 017) */
  protocol: Later<string>;
}

/** A SAML service provider, paired with its client (migration 017). */
export interface ServiceProvidersTable {
  entity_id: string;
  client_id: string;
  name: string;
  /** space separated attribute groups */
  groups: string;
  first_party: number;
  /** 'persistent' | 'transient' | 'email' | 'none' */
  name_id: string;
  /** 'auto' | 'always' | 'never' */
  encrypt: string;
  /** 'response' | 'assertion' | 'both' */
  sign: string;
  allow_unsolicited: number;
  disabled_at: number | null;
  federation_id: string | null;
  /** the metadata document as registered */
  metadata: string;
  /** JSON: the SpDescriptor read from it */
  descriptor: string;
  created_at: number;
  updated_at: number;
}

/** The identity provider's SAML keys (migration 017); private parts sealed under IDP_SECRET. */
export interface SamlKeysTable {
  kid: string;
  /** 'signing' | 'encryption' | 'metadata' */
  key_use: string;
  /** sealed PKCS#8 PEM */
  private_key: string;
  certificate: string;
  created_at: number;
  activates_at: number;
  retired_at: number | null;
}

export interface ClientOrgsTable {
  client_id: string;
  org_id: number;
  kind: string; // 'admin' (passkey API) | 'checkuser'
}

export interface PasskeysTable {
  id: Generated<number>;
  user_id: number;
  org_id: number;
  credential_id: Uint8Array;
  public_key: Uint8Array;
  sign_count: number;
  transports: string; // JSON array
  label: string;
  aaguid: string;
  backup_eligible: number;
  backup_state: number;
  mfa_verified: number;
  created_at: number;
  last_used_at: number | null;
  /** 1: the registration's attestation verified to a root of the imported FIDO metadata */
  attested: Later<number>;
}

/** Passkeys per organization and kind, kept by triggers on passkeys (migration 010); read by the organization report. */
export interface PasskeyCountsTable {
  org_id: number;
  aaguid: string;
  backup_eligible: number;
  mfa_verified: number;
  passkeys: number;
}

export interface PhotosTable {
  handle: string;
  user_id: number;
  bytes: Uint8Array;
  etag: string;
  width: number;
  height: number;
  updated_at: number;
}

export interface OidcPayloadsTable {
  id: string;
  type: string;
  payload: string;
  grant_id: string | null;
  user_code: string | null;
  uid: string | null;
  expires_at: number | null;
  consumed_at: number | null;
  /** the accountId of the payload (sessions, grants, tokens), for finding a user's artifacts */
  account_id: string | null;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  private_jwk: string; // sealed under the key-encryption key
  public_jwk: string;
  created_at: number;
  activates_at: number;
  retired_at: number | null;
}

export interface AuditEventsTable {
  id: Generated<number>;
  at: number;
  kind: string;
  client_id: string | null;
  org_id: number | null;
  eppn: string | null;
  passkey_ids: string; // JSON array of numbers
  request_id: string | null;
  details: string; // JSON object
  /** who: 'user' | 'client' | 'operator' | 'provisioning' | 'system' */
  actor_type: Later<string | null>;
  /** the user's eppn, the client id, the operator's login name, the provisioning credential */
  actor: Later<string | null>;
  /** what the action was done to: an eppn, a client id, an organization id, a key id */
  subject: Later<string | null>;
  /** the source address (IPv6 reduced to its /64) */
  source: Later<string | null>;
}

export interface ConsentsTable {
  user_id: number;
  client_id: string;
  scopes: string;
  created_at: number;
}

export interface RateLimitsTable {
  key: string;
  window_start: number;
  count: number;
}

export interface LogoutDeliveriesTable {
  id: Generated<number>;
  client_id: string;
  sub: string;
  sid: string | null;
  created_at: number;
  attempts: number;
  last_attempt_at: number | null;
  /** when to try again; null once delivered or given up */
  next_attempt_at: number | null;
  /** the relying party's HTTP status of the last attempt, null when it never answered */
  status: number | null;
  error: string | null;
  delivered_at: number | null;
}

export interface DB {
  organizations: OrganizationsTable;
  users: UsersTable;
  user_ids: UserIdsTable;
  clients: ClientsTable;
  client_orgs: ClientOrgsTable;
  passkeys: PasskeysTable;
  passkey_counts: PasskeyCountsTable;
  photos: PhotosTable;
  oidc_payloads: OidcPayloadsTable;
  signing_keys: SigningKeysTable;
  audit_events: AuditEventsTable;
  consents: ConsentsTable;
  rate_limits: RateLimitsTable;
  dpop_proofs: DpopProofsTable;
  logout_deliveries: LogoutDeliveriesTable;
  events: EventsTable;
  event_deliveries: EventDeliveriesTable;
  webhooks: WebhooksTable;
  ssf_streams: SsfStreamsTable;
  ssf_stream_subjects: SsfStreamSubjectsTable;
  mds_authenticators: MdsAuthenticatorsTable;
  mds_imports: MdsImportsTable;
  recovery_links: RecoveryLinksTable;
  roles: RolesTable;
  groups: GroupsTable;
  group_members: GroupMembersTable;
  scim_tokens: ScimTokensTable;
  ldap_directories: LdapDirectoriesTable;
  ldap_entries: LdapEntriesTable;
  ldap_groups: LdapGroupsTable;
  service_providers: ServiceProvidersTable;
  saml_keys: SamlKeysTable;
  saml_request_ids: SamlRequestIdsTable;
  saml_persistent_ids: SamlPersistentIdsTable;
  saml_session_sps: SamlSessionSpsTable;
  saml_federations: SamlFederationsTable;
  saml_federation_entities: SamlFederationEntitiesTable;
  saml_sp_blocks: SamlSpBlocksTable;
  adoption_daily: AdoptionDailyTable;
  mail_invitations: MailInvitationsTable;
  kept_keys: KeptKeysTable;
  upstream_providers: UpstreamProvidersTable;
  upstream_links: UpstreamLinksTable;
  upstream_requests: UpstreamRequestsTable;
}

/** A key kept across replacements of the master secret (migration 028, src/crypto.ts KEPT_KEYS). */
export interface KeptKeysTable {
  /** client-secret-hash | saml-pairwise */
  name: string;
  /** the key, sealed under the current master secret */
  sealed: string;
  created_at: number;
}

/** An organization's adoption funnel as recorded on one day (UTC), migration 024 (src/store/adoption.ts). */
export interface AdoptionDailyTable {
  org_id: number;
  /** YYYY-MM-DD, UTC */
  day: string;
  users: number;
  invited: number;
  signed_in: number;
  with_passkey: number;
  passkey_only: number;
}

/** An invitation to create a first passkey, sent by e-mail (migration 022). */
export interface MailInvitationsTable {
  id: Generated<number>;
  org_id: number;
  user_id: number;
  /** the recovery link the latest message carries */
  recovery_link_id: number;
  invited_at: number;
  /** who invited: 'operator:<login>', 'user:<eppn>' */
  invited_by: string;
  /** a reminder goes this long after the invitation when the user has not acted; null: none */
  remind_after_ms: number | null;
  reminded_at: number | null;
}

/** A SAML federation whose signed metadata aggregate the service trusts (src/service-providers/federations.ts). */
export interface SamlFederationsTable {
  id: Generated<number>;
  /** where the aggregate is fetched (https) */
  url: string;
  /** the federation's metadata-signing certificate (PEM), pinned when the federation was added */
  certificate: string;
  /** how far in the future an aggregate's validUntil may be */
  max_validity_ms: number;
  /** how often the aggregate is fetched again */
  refresh_ms: number;
  /** JSON array of the entity categories whose attributes are released (research-and-scholarship, ...) */
  releases: string;
  /** the Metadata Query (MDQ) base URL, for entities not in the aggregate */
  mdq_url: string | null;
  /** 1: every AuthnRequest of the federation's SPs must be signed, whatever their metadata says */
  require_signed_requests: Generated<number>;
  /** fresh (a verified aggregate within its validity), stale (past it), pending (none yet) */
  state: string;
  /** why the last fetch failed; null after a success */
  last_error: string | null;
  /** the aggregate's Name */
  name: string | null;
  /** SPs held from the last verified aggregate */
  entities: number;
  /** the verified aggregate's validUntil */
  valid_until: number | null;
  etag: string | null;
  last_modified: string | null;
  /** the last time the aggregate was fetched and verified (or answered 304) */
  last_fetched_at: number | null;
  last_attempt_at: number | null;
  next_refresh_at: number;
  /** the refresh in progress holds the federation until then (one instance fetches at a time) */
  lease_until: number | null;
  created_at: number;
}

/** An SP of a federation: from its aggregate or an MDQ answer. */
export interface SamlFederationEntitiesTable {
  federation_id: number;
  entity_id: string;
  /** the client the SP is paired with (src/service-providers/client-id.ts), made on its first sign-in */
  client_id: string;
  /** 'aggregate' | 'mdq' */
  source: string;
  /** the SpDescriptor, JSON */
  descriptor: string;
  /** JSON array of the entity categories it carries */
  categories: string;
  /** not served after this (its own or the aggregate's validUntil; an MDQ answer's cache end) */
  valid_until: number;
  fetched_at: number;
}

/** A group of an organization's directory (SCIM Groups): organization unit, class, teaching group or other. */
export interface GroupsTable {
  id: Generated<number>;
  /** the group's public id (SCIM id): a UUID */
  uid: string;
  org_id: number;
  external_id: string | null;
  display_name: string;
  /** 'org-unit' | 'class' | 'teaching-group' | 'other' */
  type: Later<string>;
  created_at: number;
  updated_at: number;
}

export interface GroupMembersTable {
  group_id: number;
  user_id: number;
  /** the member's role in the group: 'member', 'student', 'teacher', 'admin', ... */
  role: Later<string>;
}

/** A long-lived provisioning credential of one organization (Entra ID, Okta): only its hash is kept. */
export interface ScimTokensTable {
  id: Generated<number>;
  org_id: number;
  name: string;
  token_hash: string;
  created_at: number;
  /** 'operator:<login>' */
  created_by: string;
  last_used_at: number | null;
  revoked_at: number | null;
}

/** An organization's LDAP directory (docs/ldap.md): where it is, how it is read, its sync state. */
export interface LdapDirectoriesTable {
  id: Generated<number>;
  org_id: number;
  /** ldaps:// or ldap:// (with starttls) */
  url: string;
  starttls: number;
  /** the CA certificates (PEM) the directory's certificate is verified against; null: the system's */
  ca_pem: string | null;
  bind_dn: string;
  /** the service account's password, sealed under IDP_SECRET */
  bind_password: string;
  base_dn: string;
  filter: string;
  /** JSON: the import's column names to LDAP attribute names */
  mapping: string;
  groups_base_dn: string | null;
  sync_every_ms: number | null;
  /** disable, remove or keep */
  on_missing: string;
  password_check: number;
  created_at: number;
  created_by: string;
  /** where the next incremental run starts: a modifyTimestamp ('m:<generalized time>') or a uSNChanged ('u:<n>') */
  high_water: string | null;
  runs_since_full: number;
  last_full_at: number | null;
  last_sync_at: number | null;
  /** ok or failed */
  last_sync_status: string | null;
  /** JSON: the last run's counts, or its error */
  last_sync_summary: string | null;
  /** a running sync holds the directory until then */
  lease_until: number | null;
  lease_owner: string | null;
}

/** A user an LDAP directory provides, by the entry's stable id (objectGUID or entryUUID). */
export interface LdapEntriesTable {
  directory_id: number;
  external_id: string;
  user_id: number;
  dn: string;
  /** the sync disabled the user (the entry disabled or gone): a sync may enable them again, nothing else */
  disabled_by_directory: number;
  /** a digest of what the directory last said of the entry (DN, eppn, attributes, disabled): unchanged entries are skipped */
  digest: string | null;
}

/** A group an LDAP directory provides, by the group entry's stable id (objectGUID or entryUUID). */
export interface LdapGroupsTable {
  directory_id: number;
  external_id: string;
  group_id: number;
  dn: string;
}

/** A staff role: helpdesk or org-admin in one organization, operator in all (org_id 0). */
export interface RolesTable {
  id: Generated<number>;
  user_id: number;
  org_id: number;
  role: string;
  granted_at: number;
  /** who granted it: 'operator:<login>', 'user:<eppn>' */
  granted_by: string;
}

/** One authenticator model of an imported FIDO Metadata Service (MDS3) blob. */
export interface MdsAuthenticatorsTable {
  aaguid: string;
  description: string;
  /** the latest status report's status: FIDO_CERTIFIED_L1, REVOKED, USER_KEY_REMOTE_COMPROMISE, ... */
  status: string;
  status_date: string | null;
  /** data: URI from the metadata statement */
  icon: string | null;
  /** JSON: the metadata statement */
  statement: string;
  updated_at: number;
}

export interface MdsImportsTable {
  id: Generated<number>;
  /** the blob's `no` */
  serial: number;
  next_update: string;
  entries: number;
  imported_at: number;
}

/** A one-time link that lets a user register a new passkey without signing in. */
export interface RecoveryLinksTable {
  id: Generated<number>;
  /** SHA-256 of the link's secret, base64url */
  token_hash: string;
  user_id: number;
  org_id: number;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  revoked_at: number | null;
  /** who made it: 'operator:<login>', 'user:<eppn>', 'client:<id>' */
  created_by: string;
  /** 1: the user's other passkeys go when the link is used */
  delete_others: number;
}

/** The outbox: one row per event, written in the transaction of the change it reports. */
export interface EventsTable {
  id: Generated<number>;
  at: number;
  /** passkey.created, user.disabled, ... (src/audit/events.ts) */
  type: string;
  org_id: number | null;
  /** the user it is about (eppn; '' for none): deliveries about one subject go out in order */
  subject: string | null;
  /** JSON object: the webhook payload's `data` */
  data: string;
}

/** One event on its way to one destination. */
export interface EventDeliveriesTable {
  id: Generated<number>;
  event_id: number;
  /** 'webhook:<id>' or 'stream:<id>' */
  destination: string;
  subject: string | null;
  /** 'pending' | 'delivered' | 'dead' */
  state: string;
  attempts: number;
  /** when the delivery job may attempt it; null for a poll stream's (the receiver collects them) */
  next_attempt_at: number | null;
  /** an attempt in flight holds it until then */
  lease_until: number | null;
  last_attempt_at: number | null;
  /** the receiver's HTTP status of the last attempt; null when it never answered */
  last_status: number | null;
  last_error: string | null;
  delivered_at: number | null;
  created_at: number;
}

export interface WebhooksTable {
  id: Generated<number>;
  org_id: number;
  url: string;
  /** space-separated event types, padded with a space on each side; '' for every type */
  event_types: string;
  /** the signing secret, sealed under IDP_SECRET */
  secret: string;
  /** the secret before the last rotation, also signing until previous_secret_expires_at */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  created_at: number;
}

/** An OpenID Shared Signals stream of a receiver (a client). */
export interface SsfStreamsTable {
  id: string;
  client_id: string;
  /** urn:ietf:rfc:8935 (push) or urn:ietf:rfc:8936 (poll) */
  delivery_method: string;
  /** push: the receiver's URL */
  endpoint_url: string | null;
  /** push: the Authorization header the receiver asked for, sealed under IDP_SECRET */
  authorization_header: string | null;
  /** JSON array of event type URIs */
  events_requested: string;
  description: string | null;
  /** 'enabled' | 'paused' | 'disabled' */
  status: string;
  reason: string | null;
  /** 1: every user of the client's organizations; 0: only the subjects added */
  all_subjects: number;
  created_at: number;
  updated_at: number;
  /** when the receiver last asked for a verification event that was sent (min_verification_interval) */
  verification_requested_at: number | null;
}

export interface SsfStreamSubjectsTable {
  stream_id: string;
  /** the user's sub */
  sub: string;
}

/** DPoP proofs already accepted: a hash naming the proof, kept until it could no longer be accepted anyway. */
export interface DpopProofsTable {
  id: string;
  expires_at: number;
}

/** SAML request IDs already accepted (sha256 of the SP's entityID and the ID), until they would be too old anyway. */
export interface SamlRequestIdsTable {
  id: string;
  expires_at: number;
}

/** A user's persistent NameID at one SP: random, opaque, kept for as long as the user exists. */
export interface SamlPersistentIdsTable {
  user_id: number;
  entity_id: string;
  name_id: string;
  created_at: number;
}

/** An SP that received an assertion in a session: where single logout sends LogoutRequests. */
export interface SamlSessionSpsTable {
  session_uid: string;
  entity_id: string;
  user_id: number;
  name_id: string;
  name_id_format: string;
  session_index: string;
  created_at: number;
  expires_at: number;
}

/** A federation SP an operator blocked (`saml sp disable`); outlives the aggregate's refreshes (migration 020). */
export interface SamlSpBlocksTable {
  entity_id: string;
  blocked_at: number;
}

/** An organization's upstream identity provider (migration 025, docs/upstream.md). */
export interface UpstreamProvidersTable {
  id: string;
  org_id: number;
  /** oidc or saml */
  type: string;
  name: string;
  /** an https URL given to releases before migration 032; no longer read or written */
  logo_url: Later<string | null>;
  enabled: number;
  /** email, eppn, external_id or none */
  link_by: string;
  create_users: number;
  namespace: string | null;
  /** JSON object: attribute -> claim or SAML attribute name */
  mappings: string;
  oidc_issuer: string | null;
  oidc_client_id: string | null;
  /** sealed under IDP_SECRET (src/upstream/providers.ts) */
  oidc_client_secret: string | null;
  /** space-separated */
  oidc_scopes: string | null;
  oidc_auth_method: string | null;
  /** private_key_jwt: the client's private JWK, sealed */
  oidc_private_jwk: string | null;
  /** private_key_jwt: its public JWK, which the upstream registers */
  oidc_public_jwk: string | null;
  saml_entity_id: string | null;
  saml_metadata: string | null;
  saml_metadata_source: string | null;
  /** 1: the provider vouches for its mail attribute (migration 026) */
  saml_email_verified: ColumnType<number, number | undefined, number>;
  /** 1: assertions must come encrypted (migration 026) */
  saml_require_encryption: ColumnType<number, number | undefined, number>;
  /** the upstream amr values repeated in the service's sessions, space-separated (migration 030) */
  trust_amr: ColumnType<string, string | undefined, string>;
  /** the trusted federation whose aggregate the SAML metadata comes from (migration 031) */
  saml_federation_id: Later<number | null>;
  /** when the federation's aggregate stopped giving a usable entry for the entity (ms; migration 031) */
  saml_federation_missing_since: Later<number | null>;
  /** why (migration 031) */
  saml_federation_missing_reason: Later<string | null>;
  /** the logo's content type: image/png, image/webp or image/svg+xml (migration 032) */
  logo_type: Later<string | null>;
  /** the logo's bytes, at most 100 KiB (migration 032); never read with the provider, only to serve it */
  logo_data: Later<Uint8Array | null>;
  /** a version of the logo's content: its ETag and the query of its URL (migration 032) */
  logo_etag: Later<string | null>;
  created_at: number;
  updated_at: number;
}

/** An account linked to an upstream identity: once per (provider, subject) and per (provider, user). */
export interface UpstreamLinksTable {
  provider_id: string;
  user_id: number;
  subject: string;
  created_at: number;
  last_used_at: number | null;
}

/** An upstream sign-in under way: consumed once on return, the assertion handed to the interaction once. */
export interface UpstreamRequestsTable {
  id: string;
  provider_id: string;
  interaction_uid: string;
  nonce: string | null;
  code_verifier: string | null;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
  /** JSON: the UpstreamAssertion the protocol checks established, until the interaction takes it */
  assertion: string | null;
  finished_at: number | null;
  /** SHA-256 (base64url) of the browser-binding cookie set when the sign-in started (migration 030) */
  browser_hash: string | null;
  /** sign-in | link (migration 033): a link is started from the account page by a signed-in user */
  purpose: Later<string>;
  /** link: the account the identity is linked to */
  user_id: number | null;
  /** link: the session (oidc-provider's uid) that started it, which must still be the browser's at the return */
  session_uid: string | null;
}
