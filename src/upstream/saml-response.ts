// A Response from an upstream SAML identity provider, posted to the service's AssertionConsumerService,
// read as a pipeline of checks. Nothing in it is used before its signature verified with a key from
// the provider's metadata (the Response's own, or the assertion's), and from then on only what the
// signature covered is read. Each check throws an UpstreamSamlError (or the XML layer's
// XmlSecurityError): a 400 with a reason code for the log and metrics and a message for the page.
import { createHash, type KeyObject } from 'node:crypto';
import { AppError } from '../errors.ts';
import {
  childElements,
  decodePostMessage,
  decryptElement,
  hasSignature,
  NS,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
  XmlSecurityError,
  type Element,
  type ParsedXml,
} from '../saml/xml/index.ts';
import { MetadataError, NAMEID_FORMAT, type IdpDescriptor } from '../saml/metadata/index.ts';
import {
  amrOfClass,
  inScope,
  normaliseAttributes,
  PAIRWISE_ID,
  SUBJECT_ID,
  type SamlAttribute,
} from './saml-attributes.ts';
import { UPSTREAM_CLOCK_SKEW_MS, type UpstreamAssertion } from './types.ts';

/** A Response refused: `reason` for the log and metrics, the message for the error page. */
export class UpstreamSamlError extends AppError {
  readonly reason: string;
  /** for the log only */
  readonly detail: string | undefined;
  constructor(reason: string, message: string, detail?: string, status = 400) {
    super(status, message);
    this.reason = reason;
    this.detail = detail;
  }
}

const refuse = (reason: string, message: string, detail?: string) => new UpstreamSamlError(reason, message, detail);

/** The reason code of a refusal from here or from the XML layer; undefined for anything else. */
export function samlRefusalReason(err: unknown): string | undefined {
  if (err instanceof UpstreamSamlError) return err.reason;
  if (err instanceof XmlSecurityError) return err.reason;
  // the provider's stored metadata no longer reads (its validUntil passed): the operator updates it
  if (err instanceof MetadataError) return 'metadata';
  return undefined;
}

/** How far the IdP's clock may be from ours, either way. */
export const SAML_CLOCK_SKEW_MS = UPSTREAM_CLOCK_SKEW_MS;

/** A SAML provider, as the Response checks see it. */
export interface SamlUpstream {
  providerId: string;
  idp: IdpDescriptor;
  /** normalised name → SAML attribute name, over the defaults */
  mappings: Record<string, string>;
  /** the provider vouches for its mail attribute: email_verified 'true' */
  emailVerified: boolean;
  /** a plain (unencrypted) assertion is refused */
  requireEncryption: boolean;
}

/** The service provider's side. */
export interface SpContext {
  /** `<PUBLIC_URL>/saml2/sp/metadata` */
  spEntityId: string;
  acsUrl: string;
  /** the service's SAML encryption keys that may still decrypt (several during a rollover) */
  decryptionKeys: KeyObject[];
  now: number;
}

/** The single-use checks, backed by the database. */
export interface ResponseOnce {
  /** consumes the in-flight request `id` of this provider: false when unknown, another provider's, expired or used */
  consumeRequest(id: string): Promise<boolean>;
  /** records an assertion (hashed key) until `expiresAt`: false when it was seen already */
  firstUse(key: string, expiresAt: number): Promise<boolean>;
}

/** What arrived at the ACS, before anything in it is trusted. */
export interface ReceivedResponse {
  parsed: ParsedXml;
  /** the Issuer the Response names (or, failing that, its assertion): only to find the provider */
  issuer: string | undefined;
  relayState: string | undefined;
}

const MAX_RELAY_STATE = 80 * 4;

/** Step: the HTTP-POST form, decoded and parsed strictly, valid against the protocol schema, a Response. */
export async function receiveSamlResponse(body: unknown): Promise<ReceivedResponse> {
  const form = (body ?? {}) as Record<string, unknown>;
  if (typeof form.SAMLResponse !== 'string') throw refuse('binding', 'The form carries no SAML Response.');
  const relayState = form.RelayState;
  if (relayState !== undefined && (typeof relayState !== 'string' || relayState.length > MAX_RELAY_STATE))
    throw refuse('relay-state', 'The RelayState is not acceptable.');
  const parsed = decodePostMessage(form.SAMLResponse);
  await validateSchema(parsed, 'protocol');
  const root = parsed.root;
  if (root.namespaceURI !== NS.protocol || root.localName !== 'Response')
    throw refuse('message-kind', 'The message is not a SAML Response.');
  const assertion = childElements(root, NS.assertion, 'Assertion')[0];
  const issuer = issuerText(root) ?? (assertion ? issuerText(assertion) : undefined);
  return { parsed, issuer, relayState: typeof relayState === 'string' ? relayState : undefined };
}

function issuerText(element: Element): string | undefined {
  const issuers = childElements(element, NS.assertion, 'Issuer');
  if (issuers.length !== 1) return undefined;
  const format = issuers[0]!.getAttribute('Format');
  if (format && format !== 'urn:oasis:names:tc:SAML:2.0:nameid-format:entity') return undefined;
  return textOf(issuers[0]!).trim();
}

const STATUS_SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const STATUS_PREFIX = 'urn:oasis:names:tc:SAML:2.0:status:';
const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
const NCNAME = /^[A-Za-z_][A-Za-z0-9._-]{0,255}$/;
const DATETIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

function time(element: Element, attribute: string): number | undefined {
  const value = element.getAttribute(attribute);
  if (value === null || value === '') return undefined;
  const at = DATETIME.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(at)) throw refuse('time', `The assertion's ${attribute} is not a date and time.`);
  return at;
}

/** The verified Response (or the Response as received, when only its assertion is signed). */
interface ResponseStep {
  response: Element;
  /** the document the response element belongs to, for verifying an assertion signature inside it */
  parsed: ParsedXml;
  signed: boolean;
}

/** Step: the Response's Issuer, when it names one, is the provider. */
function checkResponseIssuer(received: ReceivedResponse, upstream: SamlUpstream): void {
  const issuers = childElements(received.parsed.root, NS.assertion, 'Issuer');
  if (issuers.length === 0) return;
  if (issuerText(received.parsed.root) !== upstream.idp.entityId)
    throw refuse('issuer', 'The Response was issued by another identity provider than the one this sign-in went to.');
}

/** Step: the Response's own signature, with the provider's keys from its metadata, when it has one. */
function verifyResponse(received: ReceivedResponse, upstream: SamlUpstream): ResponseStep {
  const root = received.parsed.root;
  if (!hasSignature(root)) return { response: root, parsed: received.parsed, signed: false };
  const verified = verifyEnvelopedSignature(received.parsed, root, { keys: upstream.idp.signingCertificates });
  return {
    response: verified.element,
    parsed: { xml: verified.signedXml, document: verified.document, root: verified.element },
    signed: true,
  };
}

/** Step: Destination is our ACS (required when the Response is signed), InResponseTo present (no unsolicited Responses). */
function checkEnvelope(step: ResponseStep, sp: SpContext): string {
  const destination = step.response.getAttribute('Destination');
  if (destination === null || destination === '') {
    if (step.signed) throw refuse('destination', 'A signed Response must name its destination.');
  } else if (destination !== sp.acsUrl) {
    throw refuse('destination', 'The Response was sent to another destination than this service.');
  }
  const inResponseTo = step.response.getAttribute('InResponseTo') ?? '';
  if (!inResponseTo)
    throw refuse('unsolicited', 'The Response answers no sign-in started here (unsolicited Responses are refused).');
  if (!NCNAME.test(inResponseTo)) throw refuse('in-response-to', 'The Response answers no sign-in started here.');
  return inResponseTo;
}

const STATUS_MESSAGES: Record<string, [string, string]> = {
  RequestDenied: ['access-denied', 'The identity provider refused the sign-in.'],
  AuthnFailed: ['access-denied', 'The sign-in at the identity provider did not succeed.'],
  UnknownPrincipal: ['access-denied', 'The identity provider does not know the account.'],
  NoPassive: ['no-passive', 'The identity provider could not sign you in without asking you.'],
  NoAuthnContext: ['authn-context', 'The identity provider could not sign you in the way this service asked for.'],
  InvalidNameIDPolicy: ['name-id-policy', 'The identity provider cannot release an identifier for this service.'],
};

/** Step: the status is Success; anything else ends here with what the IdP said, in plain words. */
function checkStatus(step: ResponseStep): void {
  const status = childElements(step.response, NS.protocol, 'Status')[0];
  const top = status ? childElements(status, NS.protocol, 'StatusCode')[0] : undefined;
  const value = top?.getAttribute('Value') ?? '';
  if (value === STATUS_SUCCESS) return;
  const second = top ? (childElements(top, NS.protocol, 'StatusCode')[0]?.getAttribute('Value') ?? '') : '';
  const message = status ? childElements(status, NS.protocol, 'StatusMessage')[0] : undefined;
  const detail = `status ${value}${second ? ` / ${second}` : ''}${message ? `: ${safeText(message).slice(0, 200)}` : ''}`;
  const known = second.startsWith(STATUS_PREFIX) ? STATUS_MESSAGES[second.slice(STATUS_PREFIX.length)] : undefined;
  if (known) throw refuse(known[0], known[1], detail);
  throw refuse('status', 'The identity provider could not complete the sign-in.', detail);
}

function safeText(element: Element): string {
  try {
    return textOf(element).replace(/[^\x20-\x7e]/g, '?');
  } catch {
    return '';
  }
}

/** The one assertion: verified (its own signature, or the Response's), decrypted when encrypted. */
interface AssertionStep {
  assertion: Element;
  encrypted: boolean;
}

/** Step: exactly one assertion, decrypted with the service's key when encrypted, signed by the provider. */
async function theAssertion(step: ResponseStep, upstream: SamlUpstream, sp: SpContext): Promise<AssertionStep> {
  const plain = childElements(step.response, NS.assertion, 'Assertion');
  const encrypted = childElements(step.response, NS.assertion, 'EncryptedAssertion');
  if (plain.length + encrypted.length !== 1)
    throw refuse('assertion-count', 'The Response must carry exactly one assertion.');
  let parsed: ParsedXml;
  let element: Element;
  if (encrypted.length === 1) {
    // AES-CBC (all SimpleSAMLphp 1.x and AD FS send by default) only when the Response's signature,
    // verified before decrypting, covers the ciphertext: no one can then alter it to probe for a
    // padding oracle. Otherwise only AES-GCM, which authenticates the ciphertext itself.
    parsed = await decrypt(encrypted[0]!, sp.decryptionKeys, step.signed);
    if (parsed.root.localName !== 'Assertion')
      throw refuse('assertion-count', 'The encrypted content is not an assertion.');
    await validateSchema(parsed, 'protocol');
    element = parsed.root;
  } else {
    if (upstream.requireEncryption)
      throw refuse('unencrypted', 'The identity provider must encrypt its assertions to this service.');
    parsed = step.parsed;
    element = plain[0]!;
  }
  if (hasSignature(element)) {
    const verified = verifyEnvelopedSignature(parsed, element, { keys: upstream.idp.signingCertificates });
    return { assertion: verified.element, encrypted: encrypted.length === 1 };
  }
  if (!step.signed) throw refuse('unsigned', 'Neither the Response nor its assertion is signed.');
  return { assertion: element, encrypted: encrypted.length === 1 };
}

async function decrypt(container: Element, keys: KeyObject[], allowCbc: boolean): Promise<ParsedXml> {
  let last: unknown;
  for (const privateKey of keys) {
    try {
      return await decryptElement(container, { privateKey, allowCbc });
    } catch (err) {
      last = err;
    }
  }
  throw last instanceof XmlSecurityError
    ? last
    : refuse('decryption-failed', 'The assertion could not be decrypted with this service’s keys.');
}

/** Step: Issuer, bearer subject confirmation (Recipient, InResponseTo, time), conditions (time, audience). */
function checkAssertion(assertion: Element, upstream: SamlUpstream, sp: SpContext, inResponseTo: string): number {
  if (issuerText(assertion) !== upstream.idp.entityId)
    throw refuse('issuer', 'The assertion was issued by another identity provider than the one this sign-in went to.');
  const now = sp.now;
  const skew = SAML_CLOCK_SKEW_MS;
  const subject = childElements(assertion, NS.assertion, 'Subject')[0];
  if (!subject) throw refuse('subject', 'The assertion has no subject.');
  const bearers = childElements(subject, NS.assertion, 'SubjectConfirmation')
    .filter((c) => c.getAttribute('Method') === BEARER)
    .flatMap((c) => childElements(c, NS.assertion, 'SubjectConfirmationData'));
  if (bearers.length === 0) throw refuse('subject-confirmation', 'The assertion has no bearer subject confirmation.');
  let confirmedUntil: number | undefined;
  let why = 'The assertion is not for this service.';
  for (const data of bearers) {
    const notOnOrAfter = time(data, 'NotOnOrAfter');
    const notBefore = time(data, 'NotBefore');
    if (data.getAttribute('Recipient') !== sp.acsUrl) {
      why = 'The assertion is meant for another recipient than this service.';
      continue;
    }
    if (data.getAttribute('InResponseTo') !== inResponseTo) {
      why = 'The assertion answers another sign-in than the Response.';
      continue;
    }
    if (notOnOrAfter === undefined || notOnOrAfter <= now - skew) {
      why = 'The assertion has expired: was the sign-in slow, or is a clock wrong?';
      continue;
    }
    if (notBefore !== undefined && notBefore > now + skew) {
      why = 'The assertion is not valid yet: is a clock wrong?';
      continue;
    }
    confirmedUntil = notOnOrAfter;
    break;
  }
  if (confirmedUntil === undefined) throw refuse('subject-confirmation', why);
  const conditions = childElements(assertion, NS.assertion, 'Conditions')[0];
  if (!conditions) throw refuse('conditions', 'The assertion states no conditions (an audience is required).');
  const notBefore = time(conditions, 'NotBefore');
  const notOnOrAfter = time(conditions, 'NotOnOrAfter');
  if (notBefore !== undefined && notBefore > now + skew)
    throw refuse('expired', 'The assertion is not valid yet: is a clock wrong?');
  if (notOnOrAfter !== undefined && notOnOrAfter <= now - skew)
    throw refuse('expired', 'The assertion has expired: was the sign-in slow, or is a clock wrong?');
  const restrictions = childElements(conditions, NS.assertion, 'AudienceRestriction');
  if (restrictions.length === 0) throw refuse('audience', 'The assertion names no audience.');
  for (const restriction of restrictions) {
    const audiences = childElements(restriction, NS.assertion, 'Audience').map((a) => textOf(a).trim());
    if (!audiences.includes(sp.spEntityId)) throw refuse('audience', 'The assertion is meant for another service.');
  }
  const statements = childElements(assertion, NS.assertion, 'AuthnStatement');
  if (statements.length === 0) throw refuse('authn-statement', 'The assertion states no authentication.');
  for (const statement of statements) {
    const sessionEnd = time(statement, 'SessionNotOnOrAfter');
    if (sessionEnd !== undefined && sessionEnd <= now - skew)
      throw refuse('expired', 'The session at the identity provider has ended.');
  }
  return Math.max(confirmedUntil, notOnOrAfter ?? 0);
}

function attributesOf(assertion: Element): SamlAttribute[] {
  const found: SamlAttribute[] = [];
  for (const statement of childElements(assertion, NS.assertion, 'AttributeStatement')) {
    for (const attribute of childElements(statement, NS.assertion, 'Attribute')) {
      const values: string[] = [];
      for (const value of childElements(attribute, NS.assertion, 'AttributeValue')) {
        // a NameID as the value (eduPersonTargetedID) is read as its text; other structures are left out
        const nameId = childElements(value, NS.assertion, 'NameID')[0];
        if (nameId) values.push(textOf(nameId).trim());
        else if (childElements(value).length === 0) values.push(textOf(value).trim());
      }
      const friendlyName = attribute.getAttribute('FriendlyName');
      found.push({
        name: attribute.getAttribute('Name') ?? '',
        ...(friendlyName ? { friendlyName } : {}),
        values: values.filter((v) => v.length > 0 && v.length <= 2048),
      });
    }
  }
  return found;
}

/** theAssertion returns only an assertion whose own signature, or the Response's, was verified. */
const SIGNATURE_COVERS_ASSERTION = true;

/**
 * The Subject's NameID: as it is, or decrypted from an EncryptedID with the service's encryption
 * keys through the XML layer's allow-list (decryptElement). The assertion's signature (or the
 * Response's) verified before this covers the EncryptedID's ciphertext, so no one can alter it to
 * probe for a padding oracle: AES-CBC is accepted here as for an EncryptedAssertion in a signed
 * Response (RSA PKCS#1 v1.5 key transport never is). The content must be one saml:NameID, valid
 * against the schema like a decrypted assertion.
 */
async function nameIdOf(assertion: Element, sp: SpContext): Promise<Element | undefined> {
  const subject = childElements(assertion, NS.assertion, 'Subject')[0]!;
  const plain = childElements(subject, NS.assertion, 'NameID');
  const encrypted = childElements(subject, NS.assertion, 'EncryptedID');
  if (plain.length + encrypted.length > 1)
    throw refuse('subject', 'The assertion’s subject has more than one identifier.');
  if (encrypted.length === 0) return plain[0];
  // the rule of an EncryptedAssertion: CBC where a verified signature covers the ciphertext
  const parsed = await decrypt(encrypted[0]!, sp.decryptionKeys, SIGNATURE_COVERS_ASSERTION);
  if (parsed.root.localName !== 'NameID' || childElements(parsed.root).length > 0)
    throw refuse('subject', 'The encrypted identifier is not a NameID.');
  await validateSchema(parsed, 'protocol');
  return parsed.root;
}

/**
 * The subject: the persistent NameID, else pairwise-id, else subject-id (each of the two in a scope
 * the IdP's metadata lists). A transient or e-mail NameID identifies no one for good: refused.
 */
function subjectOf(nameId: Element | undefined, attributes: SamlAttribute[], upstream: SamlUpstream): string {
  if (nameId && nameId.getAttribute('Format') === NAMEID_FORMAT.persistent) {
    const value = textOf(nameId).trim();
    const qualifier = nameId.getAttribute('NameQualifier');
    if (qualifier && qualifier !== upstream.idp.entityId)
      throw refuse('subject', 'The identifier was issued by another identity provider.');
    if (value && value.length <= 1024) return value;
  }
  for (const name of [PAIRWISE_ID, SUBJECT_ID]) {
    const values = attributes.find((a) => a.name === name)?.values ?? [];
    if (values.length === 1 && inScope(values[0]!, upstream.idp.scopes)) return values[0]!;
  }
  throw refuse(
    'subject',
    'The identity provider released no lasting identifier (a persistent NameID, subject-id or pairwise-id).',
  );
}

export interface ValidatedResponse {
  assertion: UpstreamAssertion;
  /** the in-flight request the Response answered (consumed) */
  requestId: string;
  assertionId: string;
  encrypted: boolean;
}

/**
 * Every check of a Response from `upstream`, in order; the in-flight request is consumed and the
 * assertion recorded only when everything else passed. Throws UpstreamSamlError or XmlSecurityError.
 */
export async function validateSamlResponse(
  received: ReceivedResponse,
  upstream: SamlUpstream,
  sp: SpContext,
  once: ResponseOnce,
): Promise<ValidatedResponse> {
  checkResponseIssuer(received, upstream);
  const step = verifyResponse(received, upstream);
  const inResponseTo = checkEnvelope(step, sp);
  checkStatus(step);
  const { assertion, encrypted } = await theAssertion(step, upstream, sp);
  const validUntil = checkAssertion(assertion, upstream, sp, inResponseTo);
  const attributes = attributesOf(assertion);
  const subject = subjectOf(await nameIdOf(assertion, sp), attributes, upstream);
  const assertionId = assertion.getAttribute('ID') ?? '';
  if (!NCNAME.test(assertionId)) throw refuse('assertion-id', 'The assertion has no valid ID.');
  if (!(await once.consumeRequest(inResponseTo)))
    throw refuse(
      'request',
      'This sign-in was not started here, was completed already, or took too long. Please start again.',
    );
  const key = createHash('sha256')
    .update(`upstream-assertion\n${upstream.idp.entityId}\n${assertionId}`)
    .digest('base64url');
  if (!(await once.firstUse(key, validUntil + SAML_CLOCK_SKEW_MS)))
    throw refuse('replayed', 'This sign-in has been used already. Please start again.');
  const statement = childElements(assertion, NS.assertion, 'AuthnStatement')[0]!;
  const context = childElements(statement, NS.assertion, 'AuthnContext')[0];
  const classRefElement = context ? childElements(context, NS.assertion, 'AuthnContextClassRef')[0] : undefined;
  const acr = classRefElement ? textOf(classRefElement).trim() : undefined;
  const authTime = time(statement, 'AuthnInstant');
  return {
    assertion: {
      providerId: upstream.providerId,
      subject,
      attributes: normaliseAttributes(attributes, {
        scopes: upstream.idp.scopes,
        mappings: upstream.mappings,
        emailVerified: upstream.emailVerified,
      }),
      amr: amrOfClass(acr),
      ...(acr ? { acr } : {}),
      ...(authTime !== undefined ? { authTime } : {}),
    },
    requestId: inResponseTo,
    assertionId,
    encrypted,
  };
}
