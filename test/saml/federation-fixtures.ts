// Federation metadata for the tests: SP EntityDescriptors, aggregates signed by a test federation
// key, MDQ answers, and a loopback HTTP server that serves them.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DOMParser } from '@xmldom/xmldom';
import { signEnveloped } from '../../src/saml/xml/index.ts';
import type { Party } from './saml-fixtures.ts';
import type { Store } from '../../src/store/index.ts';
import { addFederation, type FederationSettings } from '../../src/service-providers/federations.ts';
import { ensureServiceProviderClient, findServiceProvider } from '../../src/service-providers/index.ts';

export const MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
export const RS = 'http://refeds.org/category/research-and-scholarship';
export const PERSONALIZED = 'https://refeds.org/category/personalized';
export const PSEUDONYMOUS = 'https://refeds.org/category/pseudonymous';
export const ANONYMOUS = 'https://refeds.org/category/anonymous';

export interface EntityInput {
  entityId: string;
  categories?: string[];
  validUntil?: string;
  certificate?: string;
  nameIdFormats?: string[];
  /** AuthnRequestsSigned="true" on the SPSSODescriptor */
  authnRequestsSigned?: boolean;
  /** RequestedAttribute names of an AttributeConsumingService */
  requestedAttributes?: string[];
}

function bareCertificate(pem: string): string {
  return pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
}

export function spEntity(input: EntityInput): string {
  const categories = input.categories?.length
    ? `<md:Extensions><mdattr:EntityAttributes xmlns:mdattr="urn:oasis:names:tc:SAML:metadata:attribute">` +
      `<saml:Attribute xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" Name="http://macedir.org/entity-category" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">` +
      input.categories.map((c) => `<saml:AttributeValue>${c}</saml:AttributeValue>`).join('') +
      `</saml:Attribute></mdattr:EntityAttributes></md:Extensions>`
    : '';
  const host = new URL(input.entityId).host;
  const key = input.certificate
    ? `<md:KeyDescriptor><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${bareCertificate(input.certificate)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`
    : '';
  const requested = input.requestedAttributes?.length
    ? `<md:AttributeConsumingService index="1"><md:ServiceName xml:lang="en">${host}</md:ServiceName>` +
      input.requestedAttributes
        .map(
          (name) =>
            `<md:RequestedAttribute Name="${name}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri"/>`,
        )
        .join('') +
      `</md:AttributeConsumingService>`
    : '';
  const formats = (input.nameIdFormats ?? ['urn:oasis:names:tc:SAML:2.0:nameid-format:transient'])
    .map((f) => `<md:NameIDFormat>${f}</md:NameIDFormat>`)
    .join('');
  return (
    `<md:EntityDescriptor entityID="${input.entityId}"${input.validUntil ? ` validUntil="${input.validUntil}"` : ''}>` +
    categories +
    `<md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"${input.authnRequestsSigned ? ' AuthnRequestsSigned="true"' : ''}>` +
    key +
    formats +
    `<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://${host}/Shibboleth.sso/SAML2/POST" index="1"/>` +
    requested +
    `</md:SPSSODescriptor></md:EntityDescriptor>`
  );
}

export function idpEntity(entityId: string): string {
  return (
    `<md:EntityDescriptor entityID="${entityId}"><md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${entityId}/sso"/>` +
    `</md:IDPSSODescriptor></md:EntityDescriptor>`
  );
}

export interface AggregateInput {
  entities: string[];
  /** omitted: no validUntil */
  validUntil?: Date;
  id?: string;
  name?: string;
}

export function aggregateXml(input: AggregateInput): string {
  const validUntil = input.validUntil ? ` validUntil="${input.validUntil.toISOString()}"` : '';
  return (
    `<md:EntitiesDescriptor xmlns:md="${MD}" ID="${input.id ?? '_agg1'}" Name="${input.name ?? 'urn:test:federation'}"${validUntil}>` +
    input.entities.join('') +
    `</md:EntitiesDescriptor>`
  );
}

/** Signs the root element (it has an ID) with the federation's key. */
export function signRoot(xml: string, federation: Party, id = '_agg1'): string {
  const document = new DOMParser().parseFromString(xml, 'text/xml');
  return signEnveloped(document, id, { privateKey: federation.privateKey, certificate: federation.certificate });
}

export const inDays = (days: number, from = Date.now()) => new Date(from + days * 86_400_000);

export function signedAggregate(federation: Party, input: AggregateInput): string {
  return signRoot(aggregateXml({ validUntil: inDays(7), ...input }), federation, input.id ?? '_agg1');
}

/** A signed MDQ answer: one EntityDescriptor as the root, with its own ID and validUntil. */
export function signedEntity(
  federation: Party,
  input: EntityInput & { validUntilDate?: Date; cacheDuration?: string },
): string {
  const root = spEntity(input).replace(
    '<md:EntityDescriptor ',
    `<md:EntityDescriptor xmlns:md="${MD}" ID="_e1" validUntil="${(input.validUntilDate ?? inDays(7)).toISOString()}"${input.cacheDuration ? ` cacheDuration="${input.cacheDuration}"` : ''} `,
  );
  return signRoot(root, federation, '_e1');
}

export function syntheticEntities(count: number, categories: string[] = [RS]): string[] {
  return Array.from({ length: count }, (_, i) =>
    spEntity({ entityId: `https://sp${i}.example.edu/shibboleth`, categories }),
  );
}

export const mdqPath = (entityId: string) =>
  `/entities/${encodeURIComponent(`{sha1}${createHash('sha1').update(entityId).digest('hex')}`)}`;

export interface MetadataServer {
  url: string;
  /** what the next requests get, by path */
  documents: Map<string, string>;
  requests: { path: string; headers: IncomingMessage['headers'] }[];
  /** answer 503 to everything */
  down: boolean;
  etag: string | undefined;
  close(): Promise<void>;
}

/** A loopback HTTP server serving the documents set on it, with ETag handling. */
export async function metadataServer(): Promise<MetadataServer> {
  const state: Omit<MetadataServer, 'url' | 'close'> = {
    documents: new Map(),
    requests: [],
    down: false,
    etag: undefined,
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    state.requests.push({ path: req.url ?? '', headers: req.headers });
    if (state.down) return void res.writeHead(503).end('down');
    const body = state.documents.get(req.url ?? '');
    if (body === undefined) return void res.writeHead(404).end('no');
    const etag = state.etag ?? `"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`;
    if (req.headers['if-none-match'] === etag) return void res.writeHead(304, { etag }).end();
    res.writeHead(200, { 'content-type': 'application/samlmetadata+xml', etag }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as MetadataServer;
}

/** Federation settings for aggregates served by metadataServer() on loopback. */
export const LOOPBACK_FEDERATION: FederationSettings = {
  fetch: { development: true },
  maxAggregateBytes: 10 * 1024 * 1024,
  timeoutMs: 10_000,
  isolateAboveBytes: 10 * 1024 * 1024,
};

/**
 * A trusted federation whose aggregate (served from a new loopback server) holds one Research and
 * Scholarship SP, released as such; the SP's client made as its first sign-in makes it.
 */
export async function federationOfOneSp(store: Store, federation: Party, entityId: string) {
  const server = await metadataServer();
  server.documents.set(
    '/fed.xml',
    signedAggregate(federation, { entities: [spEntity({ entityId, categories: [RS] })] }),
  );
  const { id } = await addFederation(store, LOOPBACK_FEDERATION, {
    url: `${server.url}/fed.xml`,
    certificate: federation.certificate,
    releases: ['research-and-scholarship'],
  });
  await ensureServiceProviderClient(store, (await findServiceProvider(store, entityId))!);
  return { server, id };
}
