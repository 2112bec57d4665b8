// Failed client authentication at the token, introspection, revocation, PAR and device
// authorization endpoints: one audit record each, with the client id that was presented (known or
// not), the source address and the request id. The presented secret is never recorded.
import type { EventEmitter } from 'node:events';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { errors } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import type { FastifyBaseLogger } from 'fastify';
import { recordAudit } from '../audit/index.ts';

const EVENTS = [
  'grant.error',
  'introspection.error',
  'revocation.error',
  'pushed_authorization_request.error',
  'device_authorization.error',
] as const;

/** The client id a request presented: the authenticated client, else client_id from Basic or the form. */
function presentedClientId(ctx: KoaContextWithOIDC): string | null {
  const known = ctx.oidc?.client?.clientId;
  if (known) return known;
  const header = ctx.headers.authorization;
  if (typeof header === 'string' && /^basic /i.test(header)) {
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) return safeId(decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')));
  }
  const fromForm = ctx.oidc?.params?.client_id;
  return typeof fromForm === 'string' ? safeId(fromForm) : null;
}

/** Client ids are recorded only when they could be one (printable, bounded). */
function safeId(value: string): string | null {
  return value.length > 0 && value.length <= 200 && !/[\u0000-\u001f\u007f]/.test(value) ? value : null;
}

export function auditClientAuthFailures(provider: Provider, store: Store, log?: FastifyBaseLogger): void {
  for (const event of EVENTS) {
    // The typings list these events without the error argument's type.
    (provider as unknown as EventEmitter).on(event, (ctx: KoaContextWithOIDC, err: Error) => {
      if (!(err instanceof errors.InvalidClientAuth || err instanceof errors.InvalidClient)) return;
      let clientId: string | null;
      try {
        clientId = presentedClientId(ctx);
      } catch {
        clientId = null; // a Basic header that does not decode
      }
      const requestId = ctx.res.getHeader('x-request-id');
      const entry = {
        action: 'client.auth_failed' as const,
        actor: {
          type: 'client' as const,
          id: clientId,
          requestId: typeof requestId === 'string' ? requestId : null,
          ip: ctx.ip,
        },
        at: Date.now(),
        subject: clientId,
        clientId,
        details: { endpoint: event.replace('.error', ''), error: err.error_description },
      };
      recordAudit(store.db, entry).catch((e: unknown) =>
        log?.warn({ err: e }, 'could not record a client authentication failure'),
      );
    });
  }
}
