// Input no route can mean, refused before any route or the authorization server sees it: a NUL
// byte in the query, in a path parameter or in a parsed body. PostgreSQL refuses NUL in text, so a
// query built from it would fail with a 500. Checked here once for every route, rather than by each
// route that happens to look a parameter up in the database.
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.ts';

/**
 * A 400 for malformed input, a typed error like any other: each scope's error handler answers it
 * in that scope's own form (the JSON error body, a page, or an OAuth `invalid_request`).
 */
export class MalformedInput extends AppError {
  constructor(message = 'Request contains a NUL character') {
    super(400, message);
  }
}

/** A NUL in the query string. Node refuses raw control characters in a URL: only the encoded form. */
function queryContainsNul(url: string): boolean {
  const query = url.indexOf('?');
  return query !== -1 && url.includes('%00', query);
}

const MAX_DEPTH = 32;

/** A NUL in any string (key or value) of a parsed body; bytes (uploads) are not text. */
export function containsNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return false;
  // Nesting no form or API of ours uses: refused as malformed rather than left unchecked.
  if (depth > MAX_DEPTH) return true;
  for (const [key, item] of Object.entries(value)) {
    if (key.includes('\u0000') || containsNul(item, depth + 1)) return true;
  }
  return false;
}

/** The query as a request arrives; the path parameters (decoded by the router) and the body once it
 * is parsed (bodies oidc-provider reads itself stay unparsed here: its storage adapter refuses such
 * ids instead). */
export function registerRequestGuard(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) =>
    done(queryContainsNul(request.url) ? new MalformedInput() : undefined),
  );
  app.addHook('preValidation', (request, _reply, done) =>
    done(containsNul(request.params) || containsNul(request.body) ? new MalformedInput() : undefined),
  );
}
