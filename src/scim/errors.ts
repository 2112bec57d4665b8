// SCIM's error body (RFC 7644 3.12) instead of the service's { code, message }: the same typed
// errors, with a scimType where the RFC names one, answered as application/scim+json.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.ts';
import { databaseOutage } from '../http/errors.ts';

export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const SCIM_JSON = 'application/scim+json; charset=utf-8';

export type ScimType =
  | 'invalidFilter'
  | 'tooMany'
  | 'uniqueness'
  | 'mutability'
  | 'invalidSyntax'
  | 'invalidPath'
  | 'noTarget'
  | 'invalidValue'
  | 'invalidVers'
  | 'sensitive';

export class ScimError extends AppError {
  readonly scimType: ScimType | undefined;
  constructor(status: number, scimType: ScimType | undefined, message: string, headers: Record<string, string> = {}) {
    super(status, message, headers);
    this.scimType = scimType;
  }
}

export const scimError = (status: number, scimType: ScimType | undefined, message: string) =>
  new ScimError(status, scimType, message);

export function errorBody(status: number, detail: string, scimType?: ScimType) {
  return { schemas: [ERROR_SCHEMA], status: String(status), ...(scimType ? { scimType } : {}), detail };
}

export function sendScimError(reply: FastifyReply, status: number, detail: string, scimType?: ScimType) {
  return reply
    .code(status)
    .type(SCIM_JSON)
    .send(errorBody(status, detail, scimType));
}

/** The scimType a domain error means: a conflict is a uniqueness failure, a refused value an invalid one. */
function typeOf(err: AppError): ScimType | undefined {
  if (err instanceof ScimError) return err.scimType;
  if (err.status === 409) return 'uniqueness';
  if (err.status === 400) return 'invalidValue';
  return undefined;
}

/** The SCIM routes' error handler: typed errors as SCIM errors, Fastify's client errors too, anything else a bare 500. */
export function scimErrorHandler(err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof AppError) {
    reply.headers(err.headers);
    return sendScimError(reply, err.status, err.message, typeOf(err));
  }
  const fe = err as FastifyError;
  if (fe.statusCode === 413) return sendScimError(reply, 413, 'Request body is larger than the service accepts');
  if (fe.statusCode === 415) return sendScimError(reply, 415, 'Content-Type must be application/scim+json');
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500)
    return sendScimError(reply, 400, 'Request body is not valid JSON', 'invalidSyntax');
  const outage = databaseOutage(err, request);
  if (outage) {
    reply.headers(outage.headers);
    return sendScimError(reply, outage.status, outage.message);
  }
  request.log.error({ err }, 'unhandled error');
  return sendScimError(reply, 500, 'Internal Server Error');
}
