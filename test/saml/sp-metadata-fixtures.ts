// Service provider metadata in the shapes the common SP software writes it: Shibboleth SP 3
// (shibd's metadata generator), mod_auth_mellon (mellon_create_metadata.sh), pysaml2
// (make_metadata.py, unqualified ns0 prefixes) and SimpleSAMLphp (its saml:SP metadata page).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readCertificate } from '../../src/saml/xml/index.ts';
import { party } from './saml-fixtures.ts';

const MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
const DS = 'http://www.w3.org/2000/09/xmldsig#';
const POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const ARTIFACT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Artifact';
const SOAP = 'urn:oasis:names:tc:SAML:2.0:bindings:SOAP';
const PAOS = 'urn:oasis:names:tc:SAML:2.0:bindings:PAOS';

export interface SpKeys {
  signing: string; // base64 body
  encryption: string;
}

/** Two fresh certificates' bodies, as metadata holds them. */
export async function spKeys(name = 'sp.example.org'): Promise<SpKeys> {
  const signing = await party(`${name} signing`);
  const encryption = await party(`${name} encryption`);
  return {
    signing: readCertificate(signing.certificate).base64,
    encryption: readCertificate(encryption.certificate).base64,
  };
}

/** A certificate (base64 body) of an RSA key of the given size, made with openssl (ours refuses < 2048). */
export function opensslCertificate(newKey: string[] = ['-newkey', 'rsa:1024']): string {
  const dir = mkdtempSync(join(tmpdir(), 'sp-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        ...newKey,
        '-nodes',
        '-subj',
        '/CN=weak.example.org',
        '-days',
        '30',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return readFileSync(join(dir, 'cert.pem'), 'utf8').replace(/-----[A-Z ]+-----|\s/g, '');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const wrap = (body: string) => body.replace(/(.{64})/g, '$1\n');

/** Shibboleth SP 3: algsupport extensions, request initiator, six ACS of which one SAML 2 HTTP-POST. */
export function shibbolethSp(keys: SpKeys, host = 'sp.example.org'): string {
  const base = `https://${host}/Shibboleth.sso`;
  const keyInfo = (cert: string) =>
    `<ds:KeyInfo xmlns:ds="${DS}"><ds:KeyName>${host}</ds:KeyName><ds:X509Data><ds:X509SubjectName>CN=${host}</ds:X509SubjectName>` +
    `<ds:X509Certificate>\n${wrap(cert)}\n</ds:X509Certificate></ds:X509Data></ds:KeyInfo>`;
  return `<md:EntityDescriptor xmlns:md="${MD}" ID="_1b7c7b5cd3ae5a0e8b1a1f0d3f1d0f6a2b9e4c11" entityID="https://${host}/shibboleth">
  <md:Extensions xmlns:alg="urn:oasis:names:tc:SAML:metadata:algsupport">
    <alg:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha512"/>
    <alg:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/>
    <alg:SigningMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha512"/>
    <alg:SigningMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/>
  </md:Extensions>
  <md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol urn:oasis:names:tc:SAML:1.1:protocol urn:oasis:names:tc:SAML:1.0:protocol">
    <md:Extensions>
      <init:RequestInitiator xmlns:init="urn:oasis:names:tc:SAML:profiles:SSO:request-init" Binding="urn:oasis:names:tc:SAML:profiles:SSO:request-init" Location="${base}/Login"/>
      <idpdisc:DiscoveryResponse xmlns:idpdisc="urn:oasis:names:tc:SAML:profiles:SSO:idp-discovery-protocol" Binding="urn:oasis:names:tc:SAML:profiles:SSO:idp-discovery-protocol" Location="${base}/Login" index="1"/>
    </md:Extensions>
    <md:KeyDescriptor use="signing">
      ${keyInfo(keys.signing)}
    </md:KeyDescriptor>
    <md:KeyDescriptor use="encryption">
      ${keyInfo(keys.encryption)}
      <md:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#aes128-gcm"/>
      <md:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#aes256-gcm"/>
      <md:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>
      <md:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes256-cbc"/>
      <md:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#rsa-oaep"/>
      <md:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"/>
    </md:KeyDescriptor>
    <md:ArtifactResolutionService Binding="${SOAP}" Location="${base}/Artifact/SOAP" index="1"/>
    <md:SingleLogoutService Binding="${SOAP}" Location="${base}/SLO/SOAP"/>
    <md:SingleLogoutService Binding="${REDIRECT}" Location="${base}/SLO/Redirect"/>
    <md:SingleLogoutService Binding="${POST}" Location="${base}/SLO/POST"/>
    <md:SingleLogoutService Binding="${ARTIFACT}" Location="${base}/SLO/Artifact"/>
    <md:AssertionConsumerService Binding="${POST}" Location="${base}/SAML2/POST" index="1"/>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST-SimpleSign" Location="${base}/SAML2/POST-SimpleSign" index="2"/>
    <md:AssertionConsumerService Binding="${ARTIFACT}" Location="${base}/SAML2/Artifact" index="3"/>
    <md:AssertionConsumerService Binding="${PAOS}" Location="${base}/SAML2/ECP" index="4"/>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:1.0:profiles:browser-post" Location="${base}/SAML/POST" index="5"/>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:1.0:profiles:artifact-01" Location="${base}/SAML/Artifact" index="6"/>
  </md:SPSSODescriptor>
</md:EntityDescriptor>
`;
}

/** mod_auth_mellon's mellon_create_metadata.sh: default namespace, signed requests, transient NameID. */
export function mellonSp(keys: SpKeys, base = 'https://app.example.org/mellon'): string {
  const keyInfo = (cert: string) =>
    `<ds:KeyInfo xmlns:ds="${DS}"><ds:X509Data><ds:X509Certificate>${wrap(cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>`;
  return `<?xml version="1.0"?>
<EntityDescriptor entityID="${base}/metadata" xmlns="${MD}" xmlns:ds="${DS}">
  <SPSSODescriptor AuthnRequestsSigned="true" WantAssertionsSigned="true" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <KeyDescriptor use="signing">
      ${keyInfo(keys.signing)}
    </KeyDescriptor>
    <KeyDescriptor use="encryption">
      ${keyInfo(keys.encryption)}
    </KeyDescriptor>
    <SingleLogoutService Binding="${REDIRECT}" Location="${base}/logout"/>
    <SingleLogoutService Binding="${SOAP}" Location="${base}/logout"/>
    <NameIDFormat>urn:oasis:names:tc:SAML:2.0:nameid-format:transient</NameIDFormat>
    <AssertionConsumerService index="0" isDefault="true" Binding="${POST}" Location="${base}/postResponse"/>
    <AssertionConsumerService index="1" Binding="${ARTIFACT}" Location="${base}/artifactResponse"/>
    <AssertionConsumerService index="2" Binding="${PAOS}" Location="${base}/paosResponse"/>
  </SPSSODescriptor>
</EntityDescriptor>
`;
}

/** pysaml2's make_metadata.py: ns0/ns1 prefixes, entity category, requested attributes, http on localhost. */
export function pysaml2Sp(keys: SpKeys, base = 'http://localhost:8087', validUntil = '2099-01-01T00:00:00Z'): string {
  const keyInfo = (cert: string) =>
    `<ns3:KeyInfo><ns3:X509Data><ns3:X509Certificate>${cert}</ns3:X509Certificate></ns3:X509Data></ns3:KeyInfo>`;
  return (
    `<?xml version='1.0' encoding='UTF-8'?>\n` +
    `<ns0:EntityDescriptor xmlns:ns0="${MD}" xmlns:ns1="urn:oasis:names:tc:SAML:metadata:attribute" ` +
    `xmlns:ns2="urn:oasis:names:tc:SAML:2.0:assertion" xmlns:ns3="${DS}" xmlns:ns4="urn:oasis:names:tc:SAML:metadata:ui" ` +
    `entityID="${base}/sp.xml" validUntil="${validUntil}">` +
    `<ns0:Extensions><ns1:EntityAttributes>` +
    `<ns2:Attribute Name="http://macedir.org/entity-category" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">` +
    `<ns2:AttributeValue>http://refeds.org/category/research-and-scholarship</ns2:AttributeValue></ns2:Attribute>` +
    `<ns2:Attribute Name="urn:oasis:names:tc:SAML:profiles:subject-id:req" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">` +
    `<ns2:AttributeValue>pairwise-id</ns2:AttributeValue></ns2:Attribute>` +
    `</ns1:EntityAttributes></ns0:Extensions>` +
    `<ns0:SPSSODescriptor AuthnRequestsSigned="false" WantAssertionsSigned="true" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `<ns0:Extensions><ns4:UIInfo><ns4:DisplayName xml:lang="en">Research Wiki</ns4:DisplayName></ns4:UIInfo></ns0:Extensions>` +
    `<ns0:KeyDescriptor use="encryption">${keyInfo(keys.encryption)}</ns0:KeyDescriptor>` +
    `<ns0:KeyDescriptor use="signing">${keyInfo(keys.signing)}</ns0:KeyDescriptor>` +
    `<ns0:SingleLogoutService Binding="${REDIRECT}" Location="${base}/slo"/>` +
    `<ns0:NameIDFormat>urn:oasis:names:tc:SAML:2.0:nameid-format:persistent</ns0:NameIDFormat>` +
    `<ns0:AssertionConsumerService Binding="${POST}" Location="${base}/acs/post" index="1"/>` +
    `<ns0:AssertionConsumerService Binding="${REDIRECT}" Location="${base}/acs/redirect" index="2"/>` +
    `<ns0:AttributeConsumingService index="1"><ns0:ServiceName xml:lang="en">Research Wiki</ns0:ServiceName>` +
    `<ns0:RequestedAttribute FriendlyName="eduPersonPrincipalName" Name="urn:oid:1.3.6.1.4.1.5923.1.1.1.6" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri" isRequired="true"/>` +
    `<ns0:RequestedAttribute FriendlyName="mail" Name="urn:oid:0.9.2342.19200300.100.1.3" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri" isRequired="false"/>` +
    `</ns0:AttributeConsumingService></ns0:SPSSODescriptor>` +
    `<ns0:Organization><ns0:OrganizationName xml:lang="en">Example Research</ns0:OrganizationName>` +
    `<ns0:OrganizationDisplayName xml:lang="en">Example Research Lab</ns0:OrganizationDisplayName>` +
    `<ns0:OrganizationURL xml:lang="en">https://research.example.org</ns0:OrganizationURL></ns0:Organization>` +
    `<ns0:ContactPerson contactType="technical"><ns0:GivenName>Tech</ns0:GivenName>` +
    `<ns0:EmailAddress>mailto:tech@research.example.org</ns0:EmailAddress></ns0:ContactPerson>` +
    `</ns0:EntityDescriptor>`
  );
}

/** SimpleSAMLphp's saml:SP metadata: mdui in two languages, registration info, subject-id:req, SAML 1 ACS. */
export function simpleSamlPhpSp(keys: SpKeys, host = 'portal.example.org'): string {
  const base = `https://${host}/simplesaml/module.php/saml/sp`;
  const keyInfo = (cert: string) =>
    `<ds:KeyInfo><ds:X509Data><ds:X509Certificate>${cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>`;
  return `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="${MD}" xmlns:ds="${DS}" xmlns:mdrpi="urn:oasis:names:tc:SAML:metadata:rpi" xmlns:mdattr="urn:oasis:names:tc:SAML:metadata:attribute" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" xmlns:mdui="urn:oasis:names:tc:SAML:metadata:ui" entityID="${base}/metadata.php/default-sp">
  <md:Extensions>
    <mdrpi:RegistrationInfo registrationAuthority="https://federation.example.org" registrationInstant="2024-03-01T10:00:00Z"/>
    <mdattr:EntityAttributes>
      <saml:Attribute Name="urn:oasis:names:tc:SAML:profiles:subject-id:req" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">
        <saml:AttributeValue>any</saml:AttributeValue>
      </saml:Attribute>
    </mdattr:EntityAttributes>
  </md:Extensions>
  <md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol urn:oasis:names:tc:SAML:1.1:protocol">
    <md:Extensions>
      <mdui:UIInfo>
        <mdui:DisplayName xml:lang="nl">Studentenportaal</mdui:DisplayName>
        <mdui:DisplayName xml:lang="en">Student Portal</mdui:DisplayName>
      </mdui:UIInfo>
    </md:Extensions>
    <md:KeyDescriptor>
      ${keyInfo(keys.signing)}
    </md:KeyDescriptor>
    <md:SingleLogoutService Binding="${REDIRECT}" Location="${base}/singleLogoutService/default-sp"/>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:2.0:nameid-format:transient</md:NameIDFormat>
    <md:AssertionConsumerService Binding="${POST}" Location="${base}/assertionConsumerService/default-sp" index="0"/>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:1.0:profiles:browser-post" Location="${base}/saml1-acs.php/default-sp" index="1"/>
    <md:AssertionConsumerService Binding="${ARTIFACT}" Location="${base}/saml2-acs.php/default-sp" index="2"/>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:1.0:profiles:artifact-01" Location="${base}/saml1-acs.php/default-sp/artifact" index="3"/>
  </md:SPSSODescriptor>
  <md:ContactPerson contactType="technical">
    <md:GivenName>Portal Admin</md:GivenName>
    <md:EmailAddress>mailto:admin@${host}</md:EmailAddress>
  </md:ContactPerson>
</md:EntityDescriptor>
`;
}

/** A minimal SP document to vary in the refusal tests. */
export function minimalSp(
  options: {
    entityId?: string;
    validUntil?: string;
    acs?: string;
    keys?: string;
    protocol?: string;
  } = {},
): string {
  const entityId = options.entityId ?? 'https://minimal.example.org/sp';
  const acs =
    options.acs ??
    `<md:AssertionConsumerService Binding="${POST}" Location="https://minimal.example.org/acs" index="0"/>`;
  const validUntil = options.validUntil ? ` validUntil="${options.validUntil}"` : '';
  const sp =
    `<md:SPSSODescriptor protocolSupportEnumeration="${options.protocol ?? 'urn:oasis:names:tc:SAML:2.0:protocol'}">` +
    `${options.keys ?? ''}${acs}</md:SPSSODescriptor>`;
  return `<md:EntityDescriptor xmlns:md="${MD}" xmlns:ds="${DS}" entityID="${entityId}"${validUntil}>${sp}</md:EntityDescriptor>`;
}

export const acsElement = (location: string, index: number, binding = POST) =>
  `<md:AssertionConsumerService Binding="${binding}" Location="${location}" index="${index}"/>`;

export const keyDescriptor = (base64: string, use?: 'signing' | 'encryption') =>
  `<md:KeyDescriptor${use ? ` use="${use}"` : ''}><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${base64}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`;

export const BINDINGS = { POST, REDIRECT, ARTIFACT, SOAP, PAOS };
