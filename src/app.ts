// buildApp: the Fastify application with every feature registered, and nothing else.
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { JSONWebKeySet } from 'jose';
import type { Config } from './config.ts';
import { limitPasswordHashing } from './directory/passwords.ts';
import { limitDirectoryPasswordChecks } from './directory/ldap-directories.ts';
import type { Keyring } from './crypto.ts';
import type { Store } from './store/index.ts';
import { registerErrorHandling, sendError } from './http/errors.ts';
import { registerRequestGuard } from './http/request-guard.ts';
import { directRoutes } from './http/direct.ts';
import { trustProxy } from './http/client-address.ts';
import { requestId } from './http/request-id.ts';
import { traceApp } from './http/tracing.ts';
import { lazySchemaCompilers } from './http/schema-compilers.ts';
import { startHousekeeping } from './store/housekeeping.ts';
import { startLogoutRetries } from './oauth/backchannel-logout.ts';
import { healthPlugin } from './http/health.ts';
import { createTokenVerifier, type TokenVerifier } from './http/bearer.ts';
import { createDpopVerifier, dpopNonces } from './http/dpop.ts';
import { startKeyManager, type KeyManager } from './oauth/key-manager.ts';
import {
  createProviderHolder,
  directProviderRoutes,
  oauthPlugin,
  PROVIDER_PATHS,
  type ProviderHolder,
} from './oauth/plugin.ts';
import { basicAccounts, ROUTES } from './oauth/provider.ts';
import { providerRoutePatterns } from './oauth/metrics.ts';
import { registerHttpMetrics } from './http/metrics-http.ts';
import { observeStore } from './http/metrics-db.ts';
import { runFederationRefresh } from './service-providers/federation-refresh.ts';
import { activeSamlKeysCreatedAt } from './service-providers/saml-keys.ts';
import { observeSigningKeys } from './http/metrics-keys.ts';
import { observeAdoption } from './http/metrics-adoption.ts';
import { userinfoAccounts, userinfoPlugin } from './userinfo/index.ts';
import { registerOpenApi } from './http/openapi.ts';
import { providerOpenApiPaths } from './oauth/openapi-paths.ts';
import { passkeyAdminPlugin } from './passkey-admin/index.ts';
import { checkuserPlugin } from './checkuser/index.ts';
import { eventsPlugin } from './events/index.ts';
import { enableSecurityNotifications } from './audit/notifications.ts';
import { ldapPlugin } from './ldap/index.ts';
import { consolePlugin } from './console/index.ts';
import { scimPlugin } from './scim/index.ts';
import { samlIdpPlugin, samlLogoutHook } from './saml-idp/index.ts';
import {
  createBranding,
  deviceViews,
  loadExistingGrant,
  notFoundPage,
  providerViews,
  wearSiteBrand,
  webPlugin,
} from './web/index.ts';

export interface AppDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  /** injectable clock (ms) for tests */
  now?: () => number;
  /** where log lines go (default stdout) */
  logStream?: NodeJS.WritableStream;
}

export interface App {
  app: FastifyInstance;
  keyManager: KeyManager;
  verifier: TokenVerifier;
  provider: ProviderHolder;
  /** compiles the route schemas not compiled yet (they compile at a route's first request); returns how many */
  compileSchemas(): number;
}

/**
 * Request log fields. Paths can carry personal data (eppn, mail, national id numbers) and query
 * strings tokens or hints, so a route with parameters is logged by its pattern and queries never.
 */
function requestLogFields(request: FastifyRequest) {
  const pattern = request.routeOptions?.url;
  const path = request.url.split('?')[0];
  return {
    method: request.method,
    url: pattern?.includes(':') ? pattern : path,
    remoteAddress: request.ip,
  };
}

/** Caches drop what other processes change (src/store/invalidation.ts), from before any route serves. */
async function receiveInvalidations(app: FastifyInstance, store: Store): Promise<void> {
  const receiver = await store.receiveInvalidations?.((err) =>
    app.log.warn({ err }, 'cache invalidations: receiving failed, retrying'),
  );
  app.addHook('onClose', async () => receiver?.stop());
}

/** The background jobs every instance runs, stopped when the app closes. */
function startJobs(
  app: FastifyInstance,
  store: Store,
  config: Config,
  provider: ReturnType<typeof createProviderHolder>,
): void {
  const jobs = [
    startHousekeeping(store, app.log, config.auditRetentionDays),
    startLogoutRetries(store, () => provider.current(), app.log),
    runFederationRefresh(app, store, config),
  ];
  app.addHook('onClose', async () => jobs.forEach((stop) => stop()));
}

/** The verifier of the service's own access tokens, with the keys the JWKS publishes. */
function tokenVerifier(config: Config, keys: Keyring, keyManager: KeyManager, store: Store): TokenVerifier {
  const jwksOf = new WeakMap<object, JSONWebKeySet>();
  const publishedKeys = () => {
    const current = keyManager.current();
    let set = jwksOf.get(current);
    if (!set) jwksOf.set(current, (set = { keys: current.publicJwks }));
    return set;
  };
  return createTokenVerifier(
    config.publicUrl,
    publishedKeys,
    async () => void (await keyManager.refresh()),
    createDpopVerifier(store, dpopNonces(keys.dpopNonce)),
  );
}

/** The Fastify instance every route is added to, with the service's own server, logger and limits. */
function createFastify(
  deps: AppDeps,
  trust: ReturnType<typeof trustProxy>,
  direct: ReturnType<typeof directRoutes>,
  schemas: ReturnType<typeof lazySchemaCompilers>,
): FastifyInstance {
  const { config } = deps;
  return Fastify({
    serverFactory: direct.serverFactory,
    logger: {
      level: config.logLevel,
      serializers: { req: requestLogFields },
      ...(deps.logStream ? { stream: deps.logStream } : {}),
    },
    trustProxy: trust,
    genReqId: requestId,
    bodyLimit: 1024 * 1024,
    schemaController: { compilersFactory: schemas.compilersFactory },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // Long identifiers reach the routes, which answer 400 with a message instead of the router's 414.
    routerOptions: { maxParamLength: 2048 },
    // Malformed URLs (bad percent-encoding) get the same JSON error body as everything else.
    frameworkErrors: (_error, _request, reply) => {
      sendError(reply, 400, 'Malformed request URL');
    },
  });
}

export async function buildApp(deps: AppDeps): Promise<App> {
  const { config, store, keys } = deps;
  // one bound on password hashing for the whole process, whichever surface hashes
  limitPasswordHashing({ concurrency: config.passwordHashConcurrency, maxWaiting: config.passwordHashQueue });
  // and on the password checks of each LDAP directory
  limitDirectoryPasswordChecks({
    concurrency: config.ldapPasswordCheckConcurrency,
    maxWaiting: config.ldapPasswordCheckQueue,
  });
  // security notifications go out only where a mail server is configured
  enableSecurityNotifications(config.smtpUrl !== undefined);
  const schemas = lazySchemaCompilers();
  const trust = trustProxy(config.trustProxy);
  // the provider's busiest back-channel endpoints are answered before Fastify's routing
  const direct = directRoutes(trust, () => app.log);
  const app = createFastify(deps, trust, direct, schemas);

  // First, so every answer is counted, refusals by the hooks below included.
  registerHttpMetrics(app, { behindWildcards: providerRoutePatterns(ROUTES) });
  // Request and query spans when traces are on (OTEL_EXPORTER_OTLP_ENDPOINT), before any route.
  await traceApp(app, store, trust);
  const https = config.publicUrl.startsWith('https:');
  // Headers every answer carries; set before routing, so a route may still replace them (a photo
  // sets its own cache-control). A synchronous hook: this runs on every request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    // Served over https, every answer tells browsers never to come back over plain http.
    if (https) reply.header('strict-transport-security', 'max-age=31536000');
    reply.header('cache-control', 'no-store');
    done();
  });
  // After the shared headers, so a refused request still carries its request id.
  registerRequestGuard(app);

  const keyManager = await startKeyManager(config, store, keys, app.log);
  app.addHook('onClose', async () => keyManager.stop());
  observeStore(app, store);
  observeSigningKeys(app, {
    store,
    active: () => keyManager.current().active,
    rotationDays: config.keyRotationDays,
    samlCreated: () => activeSamlKeysCreatedAt(store),
  });
  observeAdoption(app, store);
  const verifier = tokenVerifier(config, keys, keyManager, store);
  const provider = createProviderHolder({
    config,
    store,
    keys,
    keyManager,
    accounts: {
      ...basicAccounts,
      ...userinfoAccounts({ config, store }),
      ...providerViews(app.log),
      ...deviceViews(),
      loadExistingGrant: loadExistingGrant(store),
      // an OpenID Connect logout reaches the session's SAML SPs too
      sessionLogout: samlLogoutHook({ config, store, keys, now: deps.now }),
    },
    log: app.log,
  });

  for (const route of directProviderRoutes(provider, config)) direct.add(route);
  // once closing, every request goes through Fastify, which answers 503
  app.addHook('preClose', (done) => {
    direct.close();
    done();
  });

  const now = deps.now ?? Date.now;
  await receiveInvalidations(app, store);
  startJobs(app, store, config, provider);
  // Before any route, which takes the error handler in force when it is added; browsers asking
  // for an unknown path get the sign-in pages' 404 page, API clients the JSON body.
  registerErrorHandling(app, { notFoundPage });
  const branding = createBranding(config.brand, store);
  wearSiteBrand(app, branding);

  // Before the features, so the OpenAPI document sees every route they add.
  await registerOpenApi(app, config, { hidden: PROVIDER_PATHS, paths: providerOpenApiPaths(config.publicUrl) });

  // Features, each a plugin with its dependencies passed in.
  await app.register(healthPlugin(store, config));
  await app.register(oauthPlugin(provider, config));
  await app.register(userinfoPlugin({ config, store, provider, verifier }));
  await app.register(passkeyAdminPlugin({ config, store, keys, verifier, now, provider }));
  await app.register(checkuserPlugin({ config, store, verifier, now }));
  await app.register(consolePlugin({ config, store, keys, verifier, now, provider, branding }));
  await app.register(scimPlugin({ config, store, verifier, now }));
  await app.register(samlIdpPlugin({ config, store, keys, provider, now, logoUrl: branding.site.logo }));
  await app.register(eventsPlugin({ config, store, keys, verifier, keyManager, now }));
  await app.register(ldapPlugin({ store, keys, now }));
  await app.register(webPlugin({ config, store, keys, provider, now, branding }));

  return { app, keyManager, verifier, provider, compileSchemas: schemas.compileAll };
}
