// One error handler: typed errors become { code, message } JSON; anything else is a logged 500
// whose body says nothing about the cause.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Negotiator from 'negotiator';
import { AppError } from '../errors.ts';
import { isDatabaseFull, isDatabaseUnavailable } from '../store/database-errors.ts';

export function errorBody(status: number, message: string) {
  return { code: status, message };
}

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

export function sendError(reply: FastifyReply, status: number, message: string, headers: Record<string, string> = {}) {
  return reply.code(status).headers(headers).type('application/json; charset=utf-8').send(errorBody(status, message));
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
  if (isDatabaseFull(err)) {
    // an operator must make room: said once per request in the log, at error level
    request.log.error({ err }, 'database full: the write was refused and rolled back; make room on its disk');
    return sendError(
      reply,
      503,
      'Service Unavailable: the database cannot take writes at the moment, try again later',
      {
        'retry-after': '30',
      },
    );
  }
  if (isDatabaseUnavailable(err)) {
    // locked beyond the busy timeout (SQLite) or connections lost (PostgreSQL): worth trying again
    request.log.warn({ err }, 'database unavailable');
    return sendError(reply, 503, 'Service Unavailable: the database is busy or unreachable, try again', {
      'retry-after': '1',
    });
  }
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
