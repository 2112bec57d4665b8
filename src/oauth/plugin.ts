// Mounts oidc-provider inside Fastify on the Feide-like paths. The provider is rebuilt when the
// signing keys change, so every instance signs with the key the others publish.
import type { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { handleError } from '../http/errors.ts';
import { MalformedInput } from '../http/request-guard.ts';
import { isDatabaseUnavailable } from '../store/database-errors.ts';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import type { KeyManager } from './key-manager.ts';
import type { DirectRoute } from '../http/direct.ts';
import { createProvider, ROUTES, type AccountSource } from './provider.ts';

export interface OAuthOptions {
  config: Config;
  store: Store;
  keys: Keyring;
  keyManager: KeyManager;
  accounts: AccountSource;
  /** where the provider's own outcomes (back-channel logout deliveries) are logged */
  log?: FastifyBaseLogger;
}

export interface ProviderHolder {
  current(): Provider;
}

const DISCOVERY = '/.well-known/openid-configuration';
const AUTHORIZATION_SERVER_METADATA = '/.well-known/oauth-authorization-server';

/** Paths served by oidc-provider. */
export const PROVIDER_PATHS = [DISCOVERY, '/oauth/*', '/openid/*'];

export function createProviderHolder(opts: OAuthOptions): ProviderHolder {
  let provider = createProvider(opts.config, opts.store, opts.keys, opts.keyManager.current(), opts.accounts, opts.log);
  opts.keyManager.onChange((keySet) => {
    provider = createProvider(opts.config, opts.store, opts.keys, keySet, opts.accounts, opts.log);
  });
  return { current: () => provider };
}

/** The logger (bound to the request id) of each request handed to oidc-provider, kept on the request. */
const REQUEST_LOG = Symbol('requestLog');
type LoggedRequest = IncomingMessage & { [REQUEST_LOG]?: () => FastifyBaseLogger };
const requestLog = (req: IncomingMessage) => (req as LoggedRequest)[REQUEST_LOG]?.();
/** Providers whose failures are logged (several handlers may share one provider). */
const watched = new WeakSet<Provider>();

/**
 * A request the client broke, not the service: Node's HTTP parser refused what followed the headers
 * (a body shorter than its Content-Length, a malformed chunk). Koa reports it as the response's
 * failure, but there is nothing for an operator to mend.
 */
function malformedHttp(err: Error & { code?: unknown }): boolean {
  return typeof err.code === 'string' && err.code.startsWith('HPE_');
}

/**
 * oidc-provider answers its own unexpected failures with `server_error` and emits them as events;
 * failures past its error handlers reach Koa's `error` event. Both are logged like every other
 * 5xx: at error level, with the request id. Malformed HTTP is the client's error: a warning.
 */
function logFailures(provider: Provider): void {
  if (watched.has(provider)) return;
  watched.add(provider);
  provider.on('server_error', (ctx: KoaContextWithOIDC, err: Error) => {
    // the database unreachable for the moment is answered 503 (database-outage.ts) and, like the
    // rest of the service's 503s, logged as a warning
    if (isDatabaseUnavailable(err)) requestLog(ctx.req)?.warn({ err }, 'database unavailable');
    else requestLog(ctx.req)?.error({ err }, 'authorization server error');
  });
  // Koa's own event: the provider is a Koa application, but its typings list only its own events
  (provider as unknown as EventEmitter).on(
    'error',
    (err: Error & { expose?: boolean; status?: number }, ctx?: KoaContextWithOIDC) => {
      if (err.expose && (err.status ?? 500) < 500) return;
      const log = ctx ? requestLog(ctx.req) : undefined;
      if (malformedHttp(err)) log?.warn({ err }, 'malformed HTTP request');
      else log?.error({ err }, 'authorization server error');
    },
  );
}

/** What the provider is told about a request besides the request itself. */
interface HandOver {
  id: string;
  ip: string;
  log: () => FastifyBaseLogger;
}

/** Hands a raw request to oidc-provider as is (its body unread), from Fastify or from a direct route. */
function providerCallback(holder: ProviderHolder, config: Config) {
  const publicUrl = new URL(config.publicUrl);
  const proto = publicUrl.protocol.replace(':', '');
  const callbacks = new WeakMap<Provider, ReturnType<Provider['callback']>>();
  return (req: IncomingMessage, res: ServerResponse, { id, ip, log }: HandOver) => {
    const provider = holder.current();
    let callback = callbacks.get(provider);
    if (!callback) {
      logFailures(provider);
      callback = provider.callback();
      callbacks.set(provider, callback);
    }
    (req as LoggedRequest)[REQUEST_LOG] = log;
    const headers = req.headers;
    // Absolute URLs come from PUBLIC_URL, never from what a client or proxy claims.
    headers['x-forwarded-proto'] = proto;
    headers['x-forwarded-host'] = publicUrl.host;
    headers['x-forwarded-for'] = ip;
    // the headers the service's own answers carry (Fastify's onSend hooks do not see these)
    res.setHeader('x-request-id', id);
    res.setHeader('x-content-type-options', 'nosniff');
    if (proto === 'https') res.setHeader('strict-transport-security', 'max-age=31536000');
    void callback(req, res);
  };
}

/** Hands a request to oidc-provider as is (its body unread); other features use it to fall back. */
export function providerHandler(holder: ProviderHolder, config: Config) {
  const handOver = providerCallback(holder, config);
  return (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    handOver(request.raw, reply.raw, { id: request.id, ip: request.ip, log: () => request.log });
  };
}

/**
 * The provider's back-channel endpoints that clients call at a high rate (tokens, introspection,
 * revocation) as direct routes: answered by the provider without Fastify's per-request work
 * (src/http/direct.ts). Requests that are not plain POSTs to these paths still reach the provider
 * through Fastify.
 */
export function directProviderRoutes(holder: ProviderHolder, config: Config): DirectRoute[] {
  const handOver = providerCallback(holder, config);
  return [ROUTES.token, ROUTES.introspection, ROUTES.revocation].map((path) => ({
    method: 'POST',
    path,
    handle: handOver,
  }));
}

export function oauthPlugin(holder: ProviderHolder, config: Config) {
  return async function oauth(app: FastifyInstance) {
    // oidc-provider reads request bodies itself: leave them unparsed in this scope.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, _payload, done) => done(null));
    // Input refused before it reaches the provider gets the OAuth error body.
    app.setErrorHandler((err, request, reply) => {
      if (!(err instanceof MalformedInput)) return handleError(err as Error, request, reply);
      return reply
        .code(400)
        .type('application/json; charset=utf-8')
        .send({ error: 'invalid_request', error_description: err.message });
    });

    const handler = providerHandler(holder, config);
    for (const url of PROVIDER_PATHS) app.all(url, handler);
    // RFC 8414 metadata is the OpenID discovery document (same issuer, same endpoints): the
    // provider answers it as its own discovery request.
    app.get(AUTHORIZATION_SERVER_METADATA, { schema: { hide: true } }, (request, reply) => {
      request.raw.url = DISCOVERY;
      handler(request, reply);
    });
  };
}
