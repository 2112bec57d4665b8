// The AuthnRequest the service, as a SAML service provider, sends an upstream identity provider:
// built as a DOM (no value can change the markup), always signed with the service's SAML signing
// key: over the query string on the HTTP-Redirect binding (SigAlg, Signature), or as an enveloped
// signature on the HTTP-POST binding. Its ID is the in-flight request's id, so the Response's
// InResponseTo leads back to exactly one sign-in under way.
import { DOMImplementation } from '@xmldom/xmldom';
import type { KeyObject } from 'node:crypto';
import { buildRedirectQuery, NS, serialize, signEnveloped, type Document } from '../saml/xml/index.ts';
import { BINDING, singleSignOnService, type IdpDescriptor } from '../saml/metadata/index.ts';

export interface AuthnRequestInput {
  /** the in-flight request's id (an NCName): the AuthnRequest's ID */
  requestId: string;
  /** the service's SP entityID (`<PUBLIC_URL>/saml2/sp/metadata`) */
  spEntityId: string;
  /** the AssertionConsumerService the Response is posted to */
  acsUrl: string;
  idp: IdpDescriptor;
  /** the binding to send the request with, when the IdP offers it (default: HTTP-Redirect) */
  binding?: 'redirect' | 'post';
  signingKey: { privateKey: KeyObject; certificate: string };
  /** ask the IdP to authenticate the user again, even within its own session */
  forceAuthn?: boolean;
  /** RequestedAuthnContext classes (comparison exact), only when asked for */
  authnContextClassRefs?: string[];
  relayState?: string;
  now: number;
}

/** Where the browser goes: a URL (HTTP-Redirect) or a form it posts (HTTP-POST). */
export type OutgoingAuthnRequest =
  | { binding: 'redirect'; url: string; xml: string }
  | { binding: 'post'; url: string; form: Record<string, string>; xml: string };

const samlTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const NCNAME = /^[A-Za-z_][A-Za-z0-9._-]*$/;

/** The AuthnRequest document (unsigned). */
export function authnRequestXml(input: AuthnRequestInput, destination: string): string {
  return serialize(authnRequestDocument(input, destination));
}

function authnRequestDocument(input: AuthnRequestInput, destination: string): Document {
  if (!NCNAME.test(input.requestId)) throw new Error('an AuthnRequest ID must be an NCName');
  const document = new DOMImplementation().createDocument(NS.protocol, 'samlp:AuthnRequest', null);
  const root = document.documentElement!;
  root.setAttributeNS('http://www.w3.org/2000/xmlns/', 'xmlns:saml', NS.assertion);
  root.setAttribute('ID', input.requestId);
  root.setAttribute('Version', '2.0');
  root.setAttribute('IssueInstant', samlTime(input.now));
  root.setAttribute('Destination', destination);
  if (input.forceAuthn) root.setAttribute('ForceAuthn', 'true');
  root.setAttribute('AssertionConsumerServiceURL', input.acsUrl);
  root.setAttribute('ProtocolBinding', BINDING.post);
  const issuer = document.createElementNS(NS.assertion, 'saml:Issuer');
  issuer.appendChild(document.createTextNode(input.spEntityId));
  root.appendChild(issuer);
  // No Format: the IdP picks from the SP metadata's NameIDFormat (persistent), or releases subject-id.
  const policy = document.createElementNS(NS.protocol, 'samlp:NameIDPolicy');
  policy.setAttribute('AllowCreate', 'true');
  root.appendChild(policy);
  const classes = input.authnContextClassRefs ?? [];
  if (classes.length > 0) {
    const requested = document.createElementNS(NS.protocol, 'samlp:RequestedAuthnContext');
    requested.setAttribute('Comparison', 'exact');
    for (const classRef of classes) {
      const element = document.createElementNS(NS.assertion, 'saml:AuthnContextClassRef');
      element.appendChild(document.createTextNode(classRef));
      requested.appendChild(element);
    }
    root.appendChild(requested);
  }
  return document;
}

/** A signed AuthnRequest for the IdP's SingleSignOnService, on the binding asked for if it offers it. */
export function buildAuthnRequest(input: AuthnRequestInput): OutgoingAuthnRequest {
  const sso = singleSignOnService(input.idp, input.binding ?? 'redirect');
  if (sso.binding === 'redirect') {
    const xml = authnRequestXml(input, sso.location);
    const query = buildRedirectQuery({
      parameter: 'SAMLRequest',
      xml,
      ...(input.relayState !== undefined ? { relayState: input.relayState } : {}),
      signingKey: input.signingKey.privateKey,
    });
    const url = new URL(sso.location);
    // the signature covers the query octets exactly as built: appended, never re-encoded by URL
    const separator = url.search ? '&' : '?';
    return { binding: 'redirect', url: `${sso.location}${separator}${query}`, xml };
  }
  const signed = signEnveloped(authnRequestDocument(input, sso.location), input.requestId, {
    privateKey: input.signingKey.privateKey,
    certificate: input.signingKey.certificate,
  });
  const form: Record<string, string> = { SAMLRequest: Buffer.from(signed, 'utf8').toString('base64') };
  if (input.relayState !== undefined) form.RelayState = input.relayState;
  return { binding: 'post', url: sso.location, form, xml: signed };
}
