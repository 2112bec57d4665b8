// One error handler: typed errors become { code, message } JSON; anything else is a logged 500
// whose body says nothing about the cause.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import { AppError } from '../errors.ts';
import { isDatabaseFull, isDatabaseUnavailable, isStatementTimeout } from '../store/database-errors.ts';

export function errorBody(status: number, message: string) {
  return { code: status, message };
}

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

export function sendError(reply: FastifyReply, status: number, message: string, headers: Record<string, string> = {}) {
  return reply.code(status).headers(headers).type('application/json; charset=utf-8').send(errorBody(status, message));
}

/** How every surface (the JSON API, SCIM, the pages, the console, the authorization server) answers a database outage. */
export interface DatabaseOutage {
  status: 503;
  headers: { 'retry-after': string };
  message: string;
}

const DATABASE_FULL: DatabaseOutage = {
  status: 503,
  headers: { 'retry-after': '30' },
  message: 'Service Unavailable: the database cannot take writes at the moment, try again later',
};
const DATABASE_UNAVAILABLE: DatabaseOutage = {
  status: 503,
  headers: { 'retry-after': '1' },
  message: 'Service Unavailable: the database is busy or unreachable, try again',
};

/**
 * The answer to err when it is the database's for the moment, logged once for the request (never
 * the driver's message in the answer): a full disk (Retry-After 30, at error level: an operator must
 * make room); a lock held too long, lost connections, a statement timeout (Retry-After 1, at warn).
 * undefined for any other error.
 */
export function databaseOutage(err: unknown, request: FastifyRequest): DatabaseOutage | undefined {
  if (isDatabaseFull(err)) {
    request.log.error({ err }, 'database full: the write was refused and rolled back; make room on its disk');
    return DATABASE_FULL;
  }
  if (!isDatabaseUnavailable(err)) return undefined;
  if (isStatementTimeout(err))
    request.log.warn({ err }, 'database statement timeout: a statement ran past DATABASE_STATEMENT_TIMEOUT_MS');
  else request.log.warn({ err }, 'database unavailable');
  return DATABASE_UNAVAILABLE;
}

export function handleError(err: FastifyError | AppError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof AppError) return sendError(reply, err.status, err.message, err.headers);
  const fe = err as FastifyError;
  if (fe.validation) {
    return sendError(
      reply,
      400,
      `Invalid request: ${fe.validationContext ?? 'input'} ${fe.validation[0]?.instancePath ?? ''} ${fe.validation[0]?.message ?? ''}`
        .replace(/\s+/g, ' ')
        .trim(),
    );
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    // Fastify's own client errors (bad JSON, body too large, unsupported media type)
    return sendError(
      reply,
      fe.statusCode,
      fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' ? 'Unsupported Media Type' : fe.message.replace(/^FST_\w+:\s*/, ''),
    );
  }
  const outage = databaseOutage(err, request);
  if (outage) return sendError(reply, outage.status, outage.message, outage.headers);
  request.log.error({ err }, 'unhandled error');
  return sendError(reply, 500, 'Internal Server Error');
}

/** Answers a browser that asked for a path nothing serves (the sign-in pages provide one). */
export type NotFoundPage = (request: FastifyRequest, reply: FastifyReply) => unknown;

/** True when the client prefers HTML to JSON: browsers navigating, not API clients (or `Accept: *\/*`). */
function prefersHtml(request: FastifyRequest): boolean {
  return new Negotiator(request.raw).mediaType(['application/json', 'text/html']) === 'text/html';
}

export function registerErrorHandling(app: FastifyInstance, options: { notFoundPage?: NotFoundPage } = {}) {
  const { notFoundPage } = options;
  app.setErrorHandler(handleError);
  app.setNotFoundHandler((request, reply) =>
    notFoundPage && prefersHtml(request) ? notFoundPage(request, reply) : sendError(reply, 404, 'Not Found'),
  );
}

/** Answers every method a path does not serve with 405 and an Allow header. */
export function methodNotAllowed(
  app: FastifyInstance,
  url: string,
  allowed: string[],
  decorate?: (reply: FastifyReply) => void,
) {
  const allow = allowed.includes('GET') && !allowed.includes('HEAD') ? [...allowed, 'HEAD'] : allowed;
  const others = ALL_METHODS.filter((m) => !allow.includes(m));
  app.route({
    method: others,
    url,
    schema: { hide: true },
    handler: async (_request, reply) => {
      decorate?.(reply);
      return sendError(reply, 405, 'Method Not Allowed', { allow: allow.join(', ') });
    },
  });
}
