// The applications of an organization as its administrators see them (the console's Applications
// page): the OpenID Connect clients and the SAML service providers its users can sign in to, and the
// API clients granted the organization, each with what it receives: its attribute groups and the
// concrete claims or SAML attributes those groups release, read from the one release table
// (src/directory/attribute-release.ts; for a SAML SP through releasedAttributeNames(), exactly as the
// SSO sends them). Clients belong to no organization: every user of every organization can sign in
// to a sign-in client or SP, so those are listed for every organization; a client that only calls
// the APIs is listed for the organizations it was granted (`client grant`).
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { oidcClaims, samlAttributeDefinitions } from '../directory/attribute-release.ts';
import { getClient, listClients, SIGN_IN_GRANTS, type Client } from '../clients/index.ts';
import { AppError } from '../errors.ts';
import { listFederationViews } from './federations.ts';
import { findServiceProviderByClientId, type ServiceProvider } from './registry.ts';
import { releasedAttributeNames, type ReleasedAttributeName } from './release.ts';
import type { AttributeGroup } from '../vocabulary.ts';

/** What one attribute group releases to the application. */
export interface GroupRelease {
  group: AttributeGroup;
  /** OpenID Connect: the claims (the scopes the client asks for decide which it gets) */
  claims: string[];
  /** SAML: FriendlyName and name */
  attributes: ReleasedAttributeName[];
}

export interface Application {
  protocol: 'oidc' | 'saml';
  /** the client id (a SAML SP's is its paired client's); the console's link to it */
  clientId: string;
  /** a SAML SP's entityID; null for OpenID Connect, and for an SP whose federation metadata has lapsed */
  entityId: string | null;
  name: string;
  groups: AttributeGroup[];
  releases: GroupRelease[];
  /** everything it may receive: OIDC claims or SAML attributes, each once */
  claims: string[];
  attributes: ReleasedAttributeName[];
  firstParty: boolean;
  disabled: boolean;
  /** signs users in (a SAML SP always does); false: calls the APIs only */
  signsIn: boolean;
  /** granted this organization for the passkey, staff and checkuser APIs */
  apiAccess: boolean;
  federation: { id: string; name: string | null } | null;
  /** OpenID Connect: where users are sent back; SAML: the assertion consumer services */
  endpoints: string[];
  createdAt: number;
}

function oidcApplication(config: Config, client: Client, orgId: number): Application {
  const groups = client.groups as AttributeGroup[];
  return {
    protocol: 'oidc',
    clientId: client.clientId,
    entityId: null,
    name: client.name,
    groups,
    releases: groups.map((group) => ({ group, claims: oidcClaims(config, [group]), attributes: [] })),
    claims: oidcClaims(config, groups),
    attributes: [],
    firstParty: client.firstParty,
    disabled: client.disabledAt !== null,
    signsIn: client.grantTypes.some((g) => SIGN_IN_GRANTS.includes(g)),
    apiAccess: client.adminOrgs.includes(orgId) || client.checkuserOrgs.includes(orgId),
    federation: null,
    endpoints: client.redirectUris,
    createdAt: client.createdAt,
  };
}

function samlApplication(client: Client, sp: ServiceProvider | undefined, federations: Map<string, string | null>) {
  const groups = (sp?.groups ?? client.groups) as AttributeGroup[];
  const attributes = sp ? releasedAttributeNames(sp) : [];
  const released = new Set(attributes.map((a) => a.name));
  const application: Application = {
    protocol: 'saml',
    clientId: client.clientId,
    entityId: sp?.entityId ?? null,
    name: sp?.name ?? client.name,
    groups,
    // each group's table entries, as far as this SP receives them
    releases: groups.map((group) => ({
      group,
      claims: [],
      attributes: samlAttributeDefinitions([group])
        .filter((d) => released.has(d.name))
        .map((d) => ({ name: d.name, friendlyName: d.friendlyName })),
    })),
    claims: [],
    attributes,
    firstParty: sp?.firstParty ?? client.firstParty,
    disabled: sp ? sp.disabled : client.disabledAt !== null,
    signsIn: true,
    apiAccess: false,
    federation: sp?.federationId ? { id: sp.federationId, name: federations.get(sp.federationId) ?? null } : null,
    endpoints: sp ? sp.descriptor.assertionConsumerServices.map((e) => e.location) : [],
    createdAt: sp?.createdAt || client.createdAt,
  };
  return application;
}

/** The application of a client, as the organization sees it: undefined when it is not one of its applications. */
async function applicationOf(
  store: Store,
  config: Config,
  orgId: number,
  client: Client,
  federations: Map<string, string | null>,
): Promise<Application | undefined> {
  if (client.protocol === 'saml')
    return samlApplication(client, await findServiceProviderByClientId(store, client.clientId), federations);
  const application = oidcApplication(config, client, orgId);
  return application.signsIn || application.apiAccess ? application : undefined;
}

async function federationNames(store: Store): Promise<Map<string, string | null>> {
  return new Map((await listFederationViews(store)).map((f) => [String(f.id), f.name]));
}

/** The organization's applications: sign-in clients and SPs, and API clients granted it; by name. */
export async function listApplications(store: Store, config: Config, orgId: number): Promise<Application[]> {
  const federations = await federationNames(store);
  const out: Application[] = [];
  for (const client of await listClients(store)) {
    const application = await applicationOf(store, config, orgId, client, federations);
    if (application) out.push(application);
  }
  return out.sort((a, b) => a.name.localeCompare(b.name, 'en') || a.clientId.localeCompare(b.clientId));
}

/** One of the organization's applications by its client id; undefined for any other id. */
export async function findApplication(
  store: Store,
  config: Config,
  orgId: number,
  clientId: string,
): Promise<Application | undefined> {
  if (typeof clientId !== 'string' || clientId.length === 0 || clientId.length > 100) return undefined;
  let client: Client;
  try {
    client = await getClient(store, clientId);
  } catch (err) {
    if (err instanceof AppError && err.status === 404) return undefined;
    throw err;
  }
  return applicationOf(store, config, orgId, client, await federationNames(store));
}
