// Signing in through an upstream SAML 2.0 identity provider (docs/upstream.md): the service as a
// SAML service provider. Its metadata at /saml2/sp/metadata (entityID and AssertionConsumerService
// both derived from PUBLIC_URL, keys from the service's own SAML keys), the start (a signed
// AuthnRequest whose ID is the in-flight request's id), and the ACS, a pipeline:
//   receiveSamlResponse -> candidate providers by Issuer -> the one whose in-flight request
//   InResponseTo names, for the browser that started it -> validateSamlResponse (signature with the
//   provider's metadata keys, decryption, destination, audience, time, subject confirmation, the
//   in-flight request consumed for that provider, the assertion ID recorded) -> finish
// Every refusal ends on the organization's error page with the request id and a log line.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { buildSpMetadata, type IdpContact } from '../saml/metadata/index.ts';
import { SAML_KEY_TIMING, samlKeys } from '../service-providers/index.ts';
import { peekUpstreamRequest, sameBrowser, startUpstreamRequest, type UpstreamPurpose } from '../upstream/requests.ts';
import { buildAuthnRequest } from '../upstream/saml-request.ts';
import {
  receiveSamlResponse,
  samlRefusalReason,
  validateSamlResponse,
  type ReceivedResponse,
} from '../upstream/saml-response.ts';
import {
  responseOnce,
  samlProvidersByEntityId,
  samlUpstreamOf,
  spAcsUrl,
  spEntityId,
  SP_ACS_PATH,
  SP_METADATA_PATH,
} from '../upstream/saml-provider.ts';
import type { UpstreamAssertion, UpstreamProvider, UpstreamRequest } from '../upstream/types.ts';
import { html, originOf, pageHeaders } from '../ui/html.ts';
import { layout } from '../ui/layout.ts';
import { clientKey, frameFor, overLimit, sendMessage, type Kit } from './kit.ts';
import { countUpstreamSignIn } from '../http/metrics.ts';
import { bindingOf, clearBindingCookie, newBinding, setBindingCookie } from './upstream-binding.ts';

const POST_SCRIPT_PATH = '/saml2/sp/post.js';
const POST_SCRIPT = "document.getElementById('saml-post').submit();\n";

type FailureKind = 'denied' | 'unreachable' | 'timeout' | 'invalid';

/** What the shared upstream sign-in (upstream-signin.ts) lends the SAML side: its finish and its error page. */
export interface SamlSignInHooks {
  finish(
    kit: Kit,
    request: FastifyRequest,
    reply: FastifyReply,
    pending: UpstreamRequest,
    assertion: UpstreamAssertion,
  ): Promise<unknown>;
  failed(
    kit: Kit,
    request: FastifyRequest,
    reply: FastifyReply,
    provider: UpstreamProvider,
    failure: { kind: FailureKind; detail: string; uid?: string },
  ): Promise<unknown>;
}

const hostOf = (kit: Kit) => new URL(kit.config.publicUrl).hostname;

/** Sends the browser to the provider's SingleSignOnService with a signed AuthnRequest. */
export async function startSamlUpstream(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: UpstreamProvider,
  { purpose, failed, forceAuthn }: { purpose: UpstreamPurpose; failed: SamlSignInHooks['failed']; forceAuthn: boolean },
) {
  const uid = purpose.kind === 'sign-in' ? purpose.interactionUid : undefined;
  const now = kit.now();
  let upstream;
  try {
    upstream = await samlUpstreamOf(provider, now);
  } catch (err) {
    if (!(err instanceof Error && 'status' in err)) throw err;
    // stored metadata that no longer reads (expired validUntil): the operator updates it
    return failed(kit, request, reply, provider, {
      kind: 'unreachable',
      detail: `metadata: ${err.message}`,
      ...(uid ? { uid } : {}),
    });
  }
  const binding = newBinding();
  const pending = await startUpstreamRequest(kit.store, {
    providerId: provider.id,
    purpose,
    browserBinding: binding,
    now,
  });
  const keys = await samlKeys(kit.store, kit.keys, now, hostOf(kit));
  const outgoing = buildAuthnRequest({
    requestId: pending.id,
    spEntityId: spEntityId(kit.config.publicUrl),
    acsUrl: spAcsUrl(kit.config.publicUrl),
    idp: upstream.idp,
    signingKey: { privateKey: keys.signing.privateKey, certificate: keys.signing.certificate },
    ...(forceAuthn ? { forceAuthn: true } : {}),
    now,
  });
  request.log.info(
    {
      event: 'upstream.start',
      upstream: provider.id,
      provider_type: 'saml',
      binding: outgoing.binding,
      purpose: purpose.kind,
    },
    'sent upstream',
  );
  reply.header('cache-control', 'no-store');
  setBindingCookie(kit, reply, pending.id, binding, 'saml');
  if (outgoing.binding === 'redirect') return reply.code(303).header('location', outgoing.url).send();
  return sendPostForm(request, reply, outgoing.url, outgoing.form);
}

/** The HTTP-POST binding: a form to the IdP, submitted by a script of our own and by a button without one. */
function sendPostForm(request: FastifyRequest, reply: FastifyReply, url: string, form: Record<string, string>) {
  const frame = frameFor(request);
  const body = html`<h1>${frame.t('saml.sending')}</h1>
<form id="saml-post" method="post" action="${url}">
${Object.entries(form).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
<button type="submit" class="primary">${frame.t('saml.continue')}</button>
</form>`;
  const origin = originOf(url);
  return reply
    .code(200)
    .headers(pageHeaders({ formTargets: origin ? [origin] : [] }))
    .send(layout(frame, frame.t('saml.sending'), body, [POST_SCRIPT_PATH]));
}

/** A refusal of the XML layer or a Response check: what kind of failure the page reports. */
function failureKind(reason: string | undefined): FailureKind {
  return reason === 'access-denied' || reason === 'no-passive' || reason === 'authn-context' ? 'denied' : 'invalid';
}

/**
 * The ACS: the Response is read strictly; the sign-in it says it answers (InResponseTo) names the
 * provider (the same IdP may serve several organizations, each with its own keys and options), and
 * only that provider's checks run, signature first. The answer must come from the browser that
 * started the sign-in (its binding cookie), checked before anything is consumed.
 */
async function acs(kit: Kit, hooks: SamlSignInHooks, request: FastifyRequest, reply: FastifyReply) {
  reply.header('cache-control', 'no-store');
  // Each Response costs a schema check and RSA verifications: a client posting them in a loop is held
  // to the budget of the sign-in pages' WebAuthn challenges (ten times the password form's).
  const retry = await overLimit(kit.limits.ceremonies, clientKey(request.ip));
  if (retry) {
    countUpstreamSignIn('saml', 'error');
    return sendMessage(reply, frameFor(request), 429, 'error.rate_limited', { headers: { 'retry-after': retry } });
  }
  let received: ReceivedResponse;
  try {
    received = await receiveSamlResponse(request.body);
  } catch (err) {
    const reason = samlRefusalReason(err);
    if (!reason) throw err;
    return unknownSender(request, reply, reason);
  }
  const candidates = received.issuer ? await samlProvidersByEntityId(kit.store, received.issuer) : [];
  if (candidates.length === 0) return unknownSender(request, reply, 'unknown-issuer');
  // Untrusted until the signature is checked: only which provider's checks to run.
  const requestId = received.parsed.root.getAttribute('InResponseTo');
  const pendingRow = await peekUpstreamRequest(kit.store, requestId);
  const provider = candidates.find((p) => p.id === pendingRow?.provider_id) ?? candidates[0]!;
  const binding = bindingOf(kit, request, requestId);
  if (pendingRow && provider.id === pendingRow.provider_id) {
    if (!sameBrowser(pendingRow, binding))
      return hooks.failed(kit, request, reply, provider, {
        kind: 'invalid',
        detail: 'browser: the Response was delivered by another browser than the one that started the sign-in',
      });
    clearBindingCookie(kit, reply, pendingRow.id, 'saml');
  }
  const now = kit.now();
  const sp = {
    spEntityId: spEntityId(kit.config.publicUrl),
    acsUrl: spAcsUrl(kit.config.publicUrl),
    decryptionKeys: (await samlKeys(kit.store, kit.keys, now, hostOf(kit))).decryption.map((k) => k.privateKey),
    now,
  };
  const once = responseOnce(kit.store, provider.id, binding, now);
  try {
    const upstream = await samlUpstreamOf(provider, now);
    const validated = await validateSamlResponse(received, upstream, sp, once);
    const pending = once.consumed()!;
    if (!provider.enabled)
      return hooks.failed(kit, request, reply, provider, {
        kind: 'denied',
        detail: 'the provider is disabled',
        ...(pending.interactionUid ? { uid: pending.interactionUid } : {}),
      });
    request.log.info(
      { event: 'upstream.saml.accepted', upstream: provider.id, encrypted: validated.encrypted },
      'SAML Response accepted',
    );
    return hooks.finish(kit, request, reply, pending, validated.assertion);
  } catch (err) {
    const reason = samlRefusalReason(err);
    if (!reason) throw err;
    const detail = `${reason}: ${(err as Error).message}${(err as { detail?: string }).detail ? ` (${(err as { detail?: string }).detail})` : ''}`;
    const uid = once.consumed()?.interactionUid;
    return hooks.failed(kit, request, reply, provider, {
      kind: failureKind(reason),
      detail,
      ...(uid ? { uid } : {}),
    });
  }
}

/** A Response no registered provider sent (or that could not even be read): the generic page, logged. */
function unknownSender(request: FastifyRequest, reply: FastifyReply, reason: string) {
  request.log.warn({ event: 'upstream.failed', provider_type: 'saml', kind: reason }, 'SAML Response refused');
  countUpstreamSignIn('saml', 'error');
  return sendMessage(reply, frameFor(request), 400, 'error.generic', { advice: 'error.try_later' });
}

/** The SP metadata, signed, rebuilt when the keys change or half its cache duration has passed. */
function spMetadataDocument(kit: Kit) {
  let cached: { fingerprint: string; builtAt: number; xml: string } | undefined;
  return async function current(): Promise<string> {
    const now = kit.now();
    const keys = await samlKeys(kit.store, kit.keys, now, hostOf(kit));
    const fingerprint = [
      keys.metadata.kid,
      ...keys.published.map((k) => k.kid),
      '|',
      ...keys.encryption.map((k) => k.kid),
    ].join(' ');
    if (cached && cached.fingerprint === fingerprint && now - cached.builtAt < SAML_KEY_TIMING.cacheDurationMs / 2)
      return cached.xml;
    const contacts: IdpContact[] = [];
    if (kit.config.saml.technicalContact) contacts.push({ type: 'technical', email: kit.config.saml.technicalContact });
    if (kit.config.saml.supportContact) contacts.push({ type: 'support', email: kit.config.saml.supportContact });
    const xml = buildSpMetadata({
      entityId: spEntityId(kit.config.publicUrl),
      acsUrl: spAcsUrl(kit.config.publicUrl),
      signingCertificates: keys.published.map((k) => k.certificate),
      encryptionCertificates: keys.encryption.map((k) => k.certificate),
      contacts,
      validUntil: now + SAML_KEY_TIMING.validityMs,
      cacheDurationMs: SAML_KEY_TIMING.cacheDurationMs,
      signingKey: { privateKey: keys.metadata.privateKey, certificate: keys.metadata.certificate },
    });
    cached = { fingerprint, builtAt: now, xml };
    return xml;
  };
}

export function upstreamSamlRoutes(kit: Kit, hooks: SamlSignInHooks) {
  return async function upstreamSaml(app: FastifyInstance) {
    const metadata = spMetadataDocument(kit);
    app.get(SP_METADATA_PATH, async function serveSpMetadata(_request: FastifyRequest, reply: FastifyReply) {
      return reply
        .type('application/samlmetadata+xml')
        .header('cache-control', 'public, max-age=3600')
        .header('x-content-type-options', 'nosniff')
        .send(await metadata());
    });
    app.post(SP_ACS_PATH, (request, reply) => acs(kit, hooks, request, reply));
    app.get(POST_SCRIPT_PATH, (_request, reply) =>
      reply.header('cache-control', 'public, max-age=300').type('text/javascript; charset=utf-8').send(POST_SCRIPT),
    );
  };
}
