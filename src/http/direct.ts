// Direct routes: a few machine-to-machine endpoints answered by the HTTP server before Fastify's
// routing, for the clean request only; every other request, and any such request that is not
// clean, goes through Fastify as usual.
//
// Fastify's per-request work (the router, the request and reply objects, the request's child
// logger, every application hook, the content-type parser and its async resource) cost about a
// tenth of the CPU of a client_credentials token, which oidc-provider answers on its own anyway
// (docs/passkey-api.md has the figures). A direct route keeps what the service adds to every
// answer: the request id (and its header), the request metrics, the request log lines at info level
// and the client address under TRUST_PROXY, computed by the same functions as on Fastify's path.
//
// A request takes a direct route only when its method and its whole URL are the route's exactly (so
// no query string to check) and the service is not closing; anything else falls through to Fastify,
// which answers it as before (a 503 while closing, the NUL check, 404s, other methods).
// app.inject() calls Fastify's handler itself, so in-process requests always take Fastify's path.
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import { clientAddress, type TrustProxy } from './client-address.ts';
import { requestId } from './request-id.ts';
import { recordRequest } from './metrics-http.ts';
import { errorBody } from './errors.ts';
import { directSpan, trustedPeer } from './tracing.ts';

/** What a direct route's handler gets besides the raw request and response. */
export interface DirectRequest {
  id: string;
  /** the client's address, under TRUST_PROXY as Fastify's request.ip */
  ip: string;
  /** the request's logger (bound to its id), made on first use */
  log: () => FastifyBaseLogger;
}

export interface DirectRoute {
  method: 'POST';
  /** the whole request URL, without a query string */
  path: string;
  /** answers the request; must not throw (failures are its own to answer) */
  handle: (req: IncomingMessage, res: ServerResponse, request: DirectRequest) => void;
}

export interface DirectRoutes {
  /** Fastify's serverFactory */
  serverFactory: (
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    options: FastifyServerOptions,
  ) => Server;
  add(route: DirectRoute): void;
  /** from now on every request goes through Fastify (which answers 503 while it closes) */
  close(): void;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** The options of Fastify's own HTTP server that a server factory must apply itself. */
type FactoryOptions = FastifyServerOptions & {
  http?: ServerOptions;
  keepAliveTimeout?: number;
  requestTimeout?: number;
  connectionTimeout?: number;
  maxRequestsPerSocket?: number;
};

/**
 * The direct routes of one application. `log` is the application's logger (known once Fastify
 * is built, so passed as a function); `trust` what TRUST_PROXY trusts.
 */
export function directRoutes(trust: TrustProxy, log: () => FastifyBaseLogger): DirectRoutes {
  const routes = new Map<string, DirectRoute>();
  let closing = false;

  function serve(route: DirectRoute, req: IncomingMessage, res: ServerResponse): void {
    const started = performance.now();
    const id = requestId(req);
    const ip = clientAddress(req, trust);
    const base = log();
    let child: FastifyBaseLogger | undefined;
    const requestLog = () => (child ??= base.child({ reqId: id }));
    // Fastify's request log lines, in the same shape (the serializers are the application's).
    const logRequests = (base as FastifyBaseLogger & { isLevelEnabled(level: string): boolean }).isLevelEnabled('info');
    if (logRequests) requestLog().info({ req: { method: req.method, url: route.path, ip } }, 'incoming request');
    const fields = { id, method: route.method, route: route.path, clientAddress: ip, trusted: trustedPeer(req, trust) };
    // the handler runs inside the request's span when traces are on; 'finish' comes after it returns
    const span = directSpan(req, fields, () => route.handle(req, res, { id, ip, log: requestLog }));
    res.once('finish', () => {
      const seconds = (performance.now() - started) / 1000;
      recordRequest(route.path, route.method, res.statusCode, seconds);
      span?.end(res.statusCode);
      if (logRequests)
        requestLog().info({ res: { statusCode: res.statusCode }, responseTime: seconds * 1000 }, 'request completed');
    });
  }

  const dispatch = (fastify: Handler): Handler =>
    function directOrFastify(req, res) {
      const route = closing ? undefined : routes.get(`${req.method} ${req.url}`);
      if (!route) return fastify(req, res);
      try {
        serve(route, req, res);
      } catch (err) {
        // a defect, not an outcome: logged, answered with the service's bare 500 (src/http/errors.ts)
        log().error({ err }, 'direct route failed');
        if (!res.headersSent) {
          res.statusCode = 500;
          res.setHeader('content-type', 'application/json; charset=utf-8');
          res.end(JSON.stringify(errorBody(500, 'Internal Server Error')));
        } else res.destroy();
      }
    };

  return {
    serverFactory(handler, options) {
      const o = options as FactoryOptions;
      const server = createServer(o.http ?? {}, dispatch(handler));
      // what Fastify does for the server it creates itself (lib/server.js)
      if (o.keepAliveTimeout !== undefined) server.keepAliveTimeout = o.keepAliveTimeout;
      if (o.requestTimeout !== undefined) server.requestTimeout = o.requestTimeout;
      if (o.connectionTimeout !== undefined) server.setTimeout(o.connectionTimeout);
      if (o.maxRequestsPerSocket) server.maxRequestsPerSocket = o.maxRequestsPerSocket;
      return server;
    },
    add(route) {
      routes.set(`${route.method} ${route.path}`, route);
    },
    close() {
      closing = true;
    },
  };
}
