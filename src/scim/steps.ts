// Steps the Users and Groups routes share: the request body (strict UTF-8 JSON), If-Match and
// If-None-Match against the resource's version, and the PatchOp message.
import type { FastifyRequest } from 'fastify';
import { scimError } from './errors.ts';

export type IdRequest = FastifyRequest<{ Params: { id: string } }>;

const decoder = new TextDecoder('utf-8', { fatal: true });

/** The body parser of application/scim+json and application/json: invalid UTF-8 or JSON is invalidSyntax. */
export function parseScimBody(
  _request: FastifyRequest,
  body: Buffer,
  done: (err: Error | null, value?: unknown) => void,
) {
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    done(scimError(400, 'invalidSyntax', 'Request body is not valid UTF-8'));
    return;
  }
  // PostgreSQL stores no NUL character; refused here rather than failing in the database
  if (text.includes('\u0000') || /\\u0000/i.test(text)) {
    done(scimError(400, 'invalidValue', 'Request body contains a NUL character'));
    return;
  }
  try {
    done(null, text.trim() === '' ? undefined : JSON.parse(text));
  } catch {
    done(scimError(400, 'invalidSyntax', 'Request body is not valid JSON'));
  }
}

/**
 * If-Match (RFC 7644 3.14): the versions the client's change applies to, or undefined when any
 * version does (no header, or `*`). The write checks them itself (a conditional update): a change to
 * a resource that changed since the client read it is 412.
 */
export function expectedVersions(request: FastifyRequest): number[] | undefined {
  const header = request.headers['if-match'];
  if (header === undefined) return undefined;
  const tags = header.split(',', 20).map((t) => t.trim());
  if (tags.includes('*')) return undefined;
  return tags.flatMap((t) => {
    const m = /^(?:W\/)?"([0-9]{1,15})"$/.exec(t);
    return m ? [Number(m[1])] : [];
  });
}

/** If-None-Match on a read (RFC 7644 3.14, RFC 9110 13.1.2): true when the client's copy is current. */
export function notModified(request: FastifyRequest, version: string): boolean {
  const header = request.headers['if-none-match'];
  if (header === undefined) return false;
  const bare = (t: string) => t.trim().replace(/^W\//, '');
  return header.split(',').some((t) => t.trim() === '*' || bare(t) === bare(version));
}

export interface Operation {
  op?: unknown;
  path?: unknown;
  value?: unknown;
}

/** The PatchOp message's operations (RFC 7644 3.5.2). */
export function patchOperations(body: unknown, schema: string): Operation[] {
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw scimError(400, 'invalidSyntax', 'Body must be a PatchOp message');
  const b = body as Record<string, unknown>;
  const schemas = b.schemas;
  if (!Array.isArray(schemas) || !schemas.some((s) => String(s).toLowerCase() === schema.toLowerCase()))
    throw scimError(400, 'invalidSyntax', `schemas must include ${schema}`);
  const ops = b.Operations ?? b.operations;
  if (!Array.isArray(ops) || ops.length === 0 || ops.length > 1000)
    throw scimError(400, 'invalidSyntax', 'Operations must be a list of 1 to 1000 operations');
  if (ops.some((o) => !o || typeof o !== 'object' || Array.isArray(o)))
    throw scimError(400, 'invalidSyntax', 'Each operation must be an object');
  return ops as Operation[];
}
