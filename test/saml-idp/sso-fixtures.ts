// AuthnRequests as service providers send them (and as attackers shape them), for the SSO tests.
import { sign as cryptoSign, type KeyObject } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import { buildRedirectQuery, readCertificate, SIGNATURE, signEnveloped, parseXml } from '../../src/saml/xml/index.ts';
import { party, type Party } from '../saml/saml-fixtures.ts';
import { mellonSp, shibbolethSp, type SpKeys } from '../saml/sp-metadata-fixtures.ts';
import type { TestContext } from '../helpers.ts';

export const PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
export const ASSERTION = 'urn:oasis:names:tc:SAML:2.0:assertion';
export const POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';

export interface TestSp {
  entityId: string;
  acs: string;
  metadata: string;
  signing: Party;
  encryption: Party;
}

async function keysOf(name: string): Promise<{ signing: Party; encryption: Party; keys: SpKeys }> {
  const signing = await party(`${name} signing`);
  const encryption = await party(`${name} encryption`);
  const keys = {
    signing: readCertificate(signing.certificate).base64,
    encryption: readCertificate(encryption.certificate).base64,
  };
  return { signing, encryption, keys };
}

/** A Shibboleth SP (does not say it signs its requests). */
export async function shibboleth(host = 'sp.example.org'): Promise<TestSp> {
  const { signing, encryption, keys } = await keysOf(host);
  return {
    entityId: `https://${host}/shibboleth`,
    acs: `https://${host}/Shibboleth.sso/SAML2/POST`,
    metadata: shibbolethSp(keys, host),
    signing,
    encryption,
  };
}

/** A mod_auth_mellon SP: AuthnRequestsSigned="true". */
export async function mellon(base = 'https://app.example.org/mellon'): Promise<TestSp> {
  const { signing, encryption, keys } = await keysOf('app.example.org');
  return {
    entityId: `${base}/metadata`,
    acs: `${base}/postResponse`,
    metadata: mellonSp(keys, base),
    signing,
    encryption,
  };
}

const iso = (ms: number) => new Date(ms).toISOString();

export interface RequestShape {
  id?: string;
  issuer: string;
  destination?: string | null;
  issueInstant?: number;
  acsUrl?: string | null;
  acsIndex?: number;
  protocolBinding?: string | null;
  force?: boolean;
  passive?: boolean;
  acrs?: string[];
  comparison?: string;
  nameIdFormat?: string;
}

let counter = 0;
export const requestId = () => `_req${Date.now().toString(36)}${(counter++).toString(36)}`;

/** An AuthnRequest (string-built on purpose: the tests shape what senders send, well-formed or not). */
export function authnRequestXml(ctx: TestContext, shape: RequestShape): string {
  const attrs = [
    `ID="${shape.id ?? requestId()}"`,
    'Version="2.0"',
    `IssueInstant="${iso(shape.issueInstant ?? Date.now())}"`,
    shape.destination === null ? '' : `Destination="${shape.destination ?? `${ctx.config.publicUrl}/saml2/idp/sso`}"`,
    shape.acsUrl ? `AssertionConsumerServiceURL="${shape.acsUrl}"` : '',
    shape.acsIndex !== undefined ? `AssertionConsumerServiceIndex="${shape.acsIndex}"` : '',
    shape.protocolBinding === null ? '' : `ProtocolBinding="${shape.protocolBinding ?? POST}"`,
    shape.force ? 'ForceAuthn="true"' : '',
    shape.passive ? 'IsPassive="true"' : '',
  ].filter(Boolean);
  const policy = shape.nameIdFormat ? `<samlp:NameIDPolicy Format="${shape.nameIdFormat}" AllowCreate="true"/>` : '';
  const context = shape.acrs
    ? `<samlp:RequestedAuthnContext Comparison="${shape.comparison ?? 'exact'}">${shape.acrs
        .map((a) => `<saml:AuthnContextClassRef>${a}</saml:AuthnContextClassRef>`)
        .join('')}</samlp:RequestedAuthnContext>`
    : '';
  return (
    `<samlp:AuthnRequest xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" ${attrs.join(' ')}>` +
    `<saml:Issuer>${shape.issuer}</saml:Issuer>${policy}${context}</samlp:AuthnRequest>`
  );
}

/** The request signed with an enveloped signature (HTTP-POST). */
export function signedXml(xml: string, signer: Party): string {
  const parsed = parseXml(xml);
  return signEnveloped(parsed.document, parsed.root.getAttribute('ID')!, {
    privateKey: signer.privateKey,
    certificate: signer.certificate,
  });
}

/** The Redirect binding's query, signed by `signer` when given. */
export function redirectQuery(xml: string, signer?: Party, relayState?: string): string {
  return buildRedirectQuery({ parameter: 'SAMLRequest', xml, relayState, signingKey: signer?.privateKey });
}

/** A Redirect binding query signed with RSA-SHA1 (which only old SPs still send). */
export function sha1RedirectQuery(xml: string, key: KeyObject): string {
  const query = `SAMLRequest=${encodeURIComponent(deflateRawSync(Buffer.from(xml)).toString('base64'))}&SigAlg=${encodeURIComponent(SIGNATURE.rsaSha1)}`;
  const signature = cryptoSign('sha1', Buffer.from(query), key).toString('base64');
  return `${query}&Signature=${encodeURIComponent(signature)}`;
}

export function getSso(ctx: TestContext, query: string, headers: Record<string, string> = {}) {
  return ctx.app.inject({ method: 'GET', url: `/saml2/idp/sso?${query}`, headers });
}

export function postSso(ctx: TestContext, xml: string, relayState?: string) {
  const form = new URLSearchParams({ SAMLRequest: Buffer.from(xml).toString('base64') });
  if (relayState !== undefined) form.set('RelayState', relayState);
  return ctx.app.inject({
    method: 'POST',
    url: '/saml2/idp/sso',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: form.toString(),
  });
}

const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';

/** An SP with the logout endpoints given (`redirect`, `post`, or none), named by its host. */
export async function logoutSp(host: string, slo: ('redirect' | 'post')[]): Promise<TestSp> {
  const { signing, encryption, keys } = await keysOf(host);
  const entityId = `https://${host}/sp`;
  const acs = `https://${host}/acs`;
  const key = (cert: string, use: string) =>
    `<md:KeyDescriptor use="${use}"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`;
  const services = slo
    .map(
      (b) =>
        `<md:SingleLogoutService Binding="${b === 'post' ? POST : REDIRECT}" Location="https://${host}/slo/${b}"/>`,
    )
    .join('');
  const metadata =
    `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${entityId}">` +
    `<md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `${key(keys.signing, 'signing')}${key(keys.encryption, 'encryption')}${services}` +
    `<md:AssertionConsumerService Binding="${POST}" Location="${acs}" index="0"/></md:SPSSODescriptor></md:EntityDescriptor>`;
  return { entityId, acs, metadata, signing, encryption };
}

/** A LogoutRequest from an SP for a NameID and SessionIndex. */
export function logoutRequestXml(
  ctx: TestContext,
  shape: { issuer: string; nameId: string; sessionIndex: string; id?: string; issueInstant?: number },
): string {
  return (
    `<samlp:LogoutRequest xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" ID="${shape.id ?? requestId()}" Version="2.0" ` +
    `IssueInstant="${iso(shape.issueInstant ?? Date.now())}" Destination="${ctx.config.publicUrl}/saml2/idp/slo">` +
    `<saml:Issuer>${shape.issuer}</saml:Issuer><saml:NameID>${shape.nameId}</saml:NameID>` +
    `<samlp:SessionIndex>${shape.sessionIndex}</samlp:SessionIndex></samlp:LogoutRequest>`
  );
}

/** An SP's LogoutResponse: a status code (and a second-level one) in response to a request. */
export function logoutResponseXml(
  ctx: TestContext,
  shape: { issuer: string; inResponseTo: string; status?: string[]; issueInstant?: number; destination?: string },
): string {
  const codes = shape.status ?? ['urn:oasis:names:tc:SAML:2.0:status:Success'];
  const status = codes.reduceRight(
    (inner, code) => `<samlp:StatusCode Value="${code}">${inner}</samlp:StatusCode>`,
    '',
  );
  return (
    `<samlp:LogoutResponse xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" ID="${requestId()}" Version="2.0" ` +
    `IssueInstant="${iso(shape.issueInstant ?? Date.now())}" ` +
    `Destination="${shape.destination ?? `${ctx.config.publicUrl}/saml2/idp/slo`}" InResponseTo="${shape.inResponseTo}">` +
    `<saml:Issuer>${shape.issuer}</saml:Issuer><samlp:Status>${status}</samlp:Status></samlp:LogoutResponse>`
  );
}
