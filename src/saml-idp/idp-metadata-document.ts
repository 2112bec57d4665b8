// The identity provider's metadata document as served: built from the keys, the organizations'
// realms, the entity categories released for trusted federations, the branding and the settings,
// signed, and kept in memory until one of them changes or a cache duration has passed (so the
// validUntil served is always most of a week away).
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import type { Logo } from '../brand.ts';
import { listOrganizations } from '../store/directory.ts';
import { buildIdpMetadata, type IdpContact, type IdpLogo } from '../saml/metadata/index.ts';
import { SAML_KEY_TIMING, samlKeys, supportedEntityCategories } from '../service-providers/index.ts';

export const METADATA_PATH = '/saml2/idp/metadata';
export const SSO_PATH = '/saml2/idp/sso';
export const SLO_PATH = '/saml2/idp/slo';

export interface MetadataDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  /** the URL of the deployment's logo (the branding's), when one is set */
  logoUrl?: string;
  now?: () => number;
}

export interface MetadataDocument {
  xml: string;
  builtAt: number;
  validUntil: number;
}

/** Width and height of the logo in pixels (mdui:Logo requires both), read once by sharp. */
async function logoSize(logo: Logo): Promise<{ width: number; height: number } | undefined> {
  try {
    const sharp = (await import('sharp')).default;
    const { width, height } = await sharp(logo.data).metadata();
    return width && height ? { width, height } : undefined;
  } catch {
    return undefined;
  }
}

function contacts(config: Config): IdpContact[] {
  const found: IdpContact[] = [];
  if (config.saml.technicalContact) found.push({ type: 'technical', email: config.saml.technicalContact });
  if (config.saml.supportContact) found.push({ type: 'support', email: config.saml.supportContact });
  return found;
}

/** A cache of the signed document; `current()` answers from memory unless an input changed. */
export function idpMetadataDocument(deps: MetadataDeps) {
  const { config, store, keys } = deps;
  const clock = deps.now ?? Date.now;
  const host = new URL(config.publicUrl).hostname;
  let cached: { fingerprint: string; document: MetadataDocument } | undefined;
  let logo: Promise<IdpLogo | undefined> | undefined;

  const logoOnce = () =>
    (logo ??= (async () => {
      if (!config.brand.logo || !deps.logoUrl) return undefined;
      const size = await logoSize(config.brand.logo);
      return size && { url: new URL(deps.logoUrl, config.publicUrl).toString(), ...size };
    })());

  return async function current(): Promise<MetadataDocument> {
    const now = clock();
    const set = await samlKeys(store, keys, now, host);
    const scopes = [...new Set((await listOrganizations(store.db)).map((o) => o.realm))].sort();
    const categories = await supportedEntityCategories(store);
    const fingerprint = [
      set.metadata.kid,
      ...set.published.map((k) => k.kid),
      '|',
      ...set.encryption.map((k) => k.kid),
      '|',
      ...scopes,
      '|',
      ...categories,
    ].join(' ');
    const fresh =
      cached && cached.fingerprint === fingerprint && now - cached.document.builtAt < SAML_KEY_TIMING.cacheDurationMs;
    if (fresh) return cached!.document;
    const validUntil = now + SAML_KEY_TIMING.validityMs;
    const xml = buildIdpMetadata({
      entityId: `${config.publicUrl}${METADATA_PATH}`,
      ssoUrl: `${config.publicUrl}${SSO_PATH}`,
      sloUrl: `${config.publicUrl}${SLO_PATH}`,
      signingCertificates: set.published.map((k) => k.certificate),
      encryptionCertificates: set.encryption.map((k) => k.certificate),
      scopes,
      displayName: config.brand.name ?? host,
      logo: await logoOnce(),
      privacyStatementUrl: config.brand.privacyUrl,
      organization:
        config.saml.organizationName && config.saml.organizationUrl
          ? { name: config.saml.organizationName, url: config.saml.organizationUrl }
          : undefined,
      contacts: contacts(config),
      entityCategorySupport: categories,
      validUntil,
      cacheDurationMs: SAML_KEY_TIMING.cacheDurationMs,
      signingKey: set.metadata,
    });
    const document = { xml, builtAt: now, validUntil };
    cached = { fingerprint, document };
    return document;
  };
}
