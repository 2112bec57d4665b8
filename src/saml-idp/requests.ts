// Inbound SAML requests (AuthnRequest, LogoutRequest) over the HTTP-Redirect and HTTP-POST
// bindings, read as a pipeline of checks. Each check returns what the next needs or throws a
// SamlRefusal; until the request's issuer and return address are verified, a refusal is the
// service's own error page, never a Response to an address the message named.
import { createHash } from 'node:crypto';
import {
  childElements,
  decodePostMessage,
  decodeRedirectMessage,
  NS,
  parseRedirectQuery,
  SIGNATURE,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
  verifyRedirectSignature,
  XmlSecurityError,
  type Element,
  type ParsedXml,
  type RedirectQuery,
} from '../saml/xml/index.ts';
import type { ServiceProvider } from '../service-providers/index.ts';
import type { Store } from '../store/index.ts';
import { recordRequestId } from '../store/saml-sso.ts';

export type Binding = 'redirect' | 'post';
export type RequestKind = 'AuthnRequest' | 'LogoutRequest' | 'LogoutResponse';

/** A request refused before anything could be sent back to the SP: the error page says why. */
export class SamlRefusal extends Error {
  readonly reason: string;
  readonly status: number;
  constructor(reason: string, message: string, status = 400) {
    super(message);
    this.reason = reason;
    this.status = status;
  }
}

const refuse = (reason: string, message: string) => new SamlRefusal(reason, message);

/** How far IssueInstant may be from our clock, either way, and how old a request may be. */
export const CLOCK_SKEW_MS = 3 * 60_000;
export const MAX_REQUEST_AGE_MS = 5 * 60_000;

/** What arrived, before anything in it is trusted. */
export interface Received {
  binding: Binding;
  parsed: ParsedXml;
  relayState: string | undefined;
  /** the Redirect binding's query (its signature covers the raw octets) */
  query?: RedirectQuery;
}

const MAX_RELAY_STATE = 80 * 4; // SAML bindings 3.4.3: 80 bytes; some SPs send more, within reason

function relayStateOf(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > MAX_RELAY_STATE)
    throw refuse('relay-state', 'the RelayState is too long');
  return value;
}

/** Step: the HTTP-Redirect binding's query, from the raw query string as received. */
export function receiveRedirect(rawQuery: string, parameter: 'SAMLRequest' | 'SAMLResponse' = 'SAMLRequest'): Received {
  const query = parseRedirectQuery(rawQuery);
  if (query.parameter !== parameter) throw refuse('binding', `the query string carries no ${parameter}`);
  const parsed = decodeRedirectMessage(query.message);
  return { binding: 'redirect', parsed, relayState: relayStateOf(query.relayState), query };
}

/** Step: the HTTP-POST binding's form. */
export function receivePost(body: unknown, parameter: 'SAMLRequest' | 'SAMLResponse' = 'SAMLRequest'): Received {
  const form = (body ?? {}) as Record<string, unknown>;
  const value = form[parameter];
  if (typeof value !== 'string') throw refuse('binding', `the form carries no ${parameter}`);
  return { binding: 'post', parsed: decodePostMessage(value), relayState: relayStateOf(form.RelayState) };
}

/** Step: valid against the SAML protocol schema, and the kind of request this endpoint takes. */
export async function checkSchema(received: Received, kind: RequestKind): Promise<Received> {
  await validateSchema(received.parsed, 'protocol');
  const root = received.parsed.root;
  if (root.namespaceURI !== NS.protocol || root.localName !== kind)
    throw refuse('message-kind', `the message is not a ${kind}`);
  return received;
}

function issuerOf(root: Element): string {
  const issuers = childElements(root, NS.assertion, 'Issuer');
  if (issuers.length !== 1) throw refuse('issuer', 'the request names no issuer');
  const format = issuers[0]!.getAttribute('Format');
  if (format && format !== 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity')
    throw refuse('issuer', 'the issuer is not an entity');
  return textOf(issuers[0]!).trim();
}

/** Step: the Issuer is a registered SP, and enabled. */
export async function findIssuer(
  received: Received,
  find: (entityId: string) => Promise<ServiceProvider | undefined>,
): Promise<ServiceProvider> {
  const entityId = issuerOf(received.parsed.root);
  const sp = entityId ? await find(entityId) : undefined;
  if (!sp) throw new SamlRefusal('unknown-sp', 'the service provider is not known to this identity provider', 403);
  if (sp.disabled) throw new SamlRefusal('disabled-sp', 'the service provider is disabled', 403);
  return sp;
}

export interface Verified {
  /** the request element to read: what the signature covered, or the unsigned message as received */
  request: Element;
  signed: boolean;
  signatureAlgorithm: string | undefined;
}

/**
 * Why the SP's request must be signed, or undefined when an unsigned one is accepted: the endpoint
 * requires it (`required`: logout), the SP's metadata says it signs its requests
 * (AuthnRequestsSigned), or its federation's policy requires signed requests
 * (`saml federation add --require-signed-requests`).
 */
export function signatureRequirement(sp: ServiceProvider, required: boolean): string | undefined {
  if (required) return 'this request must be signed';
  if (sp.descriptor.authnRequestsSigned) return 'the service provider signs its requests';
  if (sp.requireSignedRequests) return 'the federation of the service provider requires signed requests';
  return undefined;
}

/**
 * Step: the signature, with the SP's keys from its metadata. Redirect: over the raw query octets.
 * POST: an enveloped signature of the root, and from then on only the element it covered is read.
 * An unsigned request is refused, on both bindings, whenever signatureRequirement() says so; SHA-1
 * is accepted on input only.
 */
export function verifyRequest(received: Received, sp: ServiceProvider, required: boolean): Verified {
  const keys = sp.descriptor.signingCertificates;
  const mustSign = signatureRequirement(sp, required);
  const unsigned = (): Verified => {
    if (mustSign) throw refuse('unsigned', `${mustSign}, and this one is not signed`);
    return { request: received.parsed.root, signed: false, signatureAlgorithm: undefined };
  };
  if (received.binding === 'redirect') {
    const query = received.query!;
    if (query.signature === undefined) return unsigned();
    if (keys.length === 0) throw refuse('no-key', 'the service provider publishes no signing key');
    verifyRedirectSignature(query, { keys, allowSha1: true });
    return { request: received.parsed.root, signed: true, signatureAlgorithm: query.sigAlg };
  }
  const signatures = childElements(received.parsed.root, NS.dsig, 'Signature');
  if (signatures.length === 0) return unsigned();
  if (keys.length === 0) throw refuse('no-key', 'the service provider publishes no signing key');
  const verified = verifyEnvelopedSignature(received.parsed, received.parsed.root, { keys, allowSha1: true });
  return { request: verified.element, signed: true, signatureAlgorithm: verified.signatureAlgorithm };
}

/** Step: Destination is this endpoint (required on signed requests, checked whenever present). */
export function checkDestination(verified: Verified, endpoint: string): void {
  const destination = verified.request.getAttribute('Destination');
  if (destination === null || destination === '') {
    if (verified.signed) throw refuse('destination', 'a signed request must name its destination');
    return;
  }
  if (destination !== endpoint) throw refuse('destination', 'the request was sent to another destination');
}

/** Step: IssueInstant within the allowed skew and not too old. */
export function checkIssueInstant(verified: Verified, now: number): number {
  const text = verified.request.getAttribute('IssueInstant') ?? '';
  const at = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(at)) throw refuse('issue-instant', 'the request has no valid IssueInstant');
  if (at > now + CLOCK_SKEW_MS) throw refuse('issue-instant', 'the request was issued in the future');
  if (at < now - MAX_REQUEST_AGE_MS - CLOCK_SKEW_MS) throw refuse('issue-instant', 'the request is too old');
  return at;
}

/** Step: the request ID is accepted once, across every instance sharing the database. */
export async function checkReplay(store: Store, verified: Verified, sp: ServiceProvider, now: number): Promise<string> {
  const id = verified.request.getAttribute('ID') ?? '';
  if (!/^[A-Za-z_][\w.-]{0,255}$/.test(id)) throw refuse('request-id', 'the request has no valid ID');
  const key = createHash('sha256').update(`${sp.entityId}\n${id}`).digest('base64url');
  const expires = now + MAX_REQUEST_AGE_MS + 2 * CLOCK_SKEW_MS;
  if (!(await recordRequestId(store.db, key, expires, now)))
    throw refuse('replayed', 'the request has been used already');
  return id;
}

const POST_BINDING = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';

/**
 * Step: where the Response goes. AssertionConsumerServiceURL or AssertionConsumerServiceIndex must
 * be one the SP's metadata lists with the HTTP-POST binding; without either, the default one. A
 * ProtocolBinding other than HTTP-POST is refused.
 */
export function resolveAcs(request: Element | undefined, sp: ServiceProvider): string {
  const services = sp.descriptor.assertionConsumerServices.filter((s) => s.binding === POST_BINDING);
  const binding = request?.getAttribute('ProtocolBinding');
  if (binding && binding !== POST_BINDING)
    throw refuse('protocol-binding', 'only the HTTP-POST binding is offered for responses');
  const url = request?.getAttribute('AssertionConsumerServiceURL');
  const index = request?.getAttribute('AssertionConsumerServiceIndex');
  if (url && index) throw refuse('acs', 'the request names its return address twice');
  if (url) {
    if (!services.some((s) => s.location === url))
      throw refuse('acs', 'the return address is not one the service provider registered');
    return url;
  }
  if (index) {
    const found = services.find((s) => String(s.index) === index);
    if (!found) throw refuse('acs', 'the return address is not one the service provider registered');
    return found.location;
  }
  const chosen = services.find((s) => s.isDefault) ?? [...services].sort((a, b) => (a.index ?? 0) - (b.index ?? 0))[0];
  if (!chosen) throw refuse('acs', 'the service provider registered no HTTP-POST return address');
  return chosen.location;
}

/** A refusal from the XML layer or a check above, as the reason code the page, log and metrics use. */
export function refusalReason(err: unknown): string | undefined {
  if (err instanceof SamlRefusal) return err.reason;
  if (err instanceof XmlSecurityError) return err.reason;
  return undefined;
}

export const SHA1_SIGNATURE = SIGNATURE.rsaSha1;
