// What tracing.ts (always loaded) and tracing-sdk.ts (loaded only when traces are on) share.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { QueryTiming } from '../store/index.ts';

export type SpanAttributes = Record<string, string | number | boolean>;

/** The span attribute carrying the request id (src/http/request-id.ts), on a request's span and its children. */
export const REQUEST_ID_ATTRIBUTE = 'http.request.id';

/** What the SDK side (tracing-sdk.ts) provides. */
export interface Tracing {
  /** runs work in a span, a child of the active one (a new trace when there is none) */
  span<T>(name: string, attributes: SpanAttributes, work: () => Promise<T>): Promise<T>;
  /** a finished query as a span, a child of the active span; nothing outside of one */
  query(system: string, timing: QueryTiming): void;
  /** registers request spans on the app (@fastify/otel) */
  register(app: FastifyInstance): Promise<void>;
  /** a request answered before Fastify (src/http/direct.ts): its span, and `work` run inside it */
  direct(req: IncomingMessage, fields: DirectFields, work: () => void): { end(status: number): void };
  /** adds the active span's trace context (traceparent) to outgoing request headers */
  inject(headers: Record<string, string>): void;
  /** exports what is buffered and stops */
  shutdown(): Promise<void>;
}

export interface DirectFields {
  id: string;
  method: string;
  route: string;
  clientAddress: string;
  /** whether the caller's traceparent is honoured (the nearest peer is a trusted proxy) */
  trusted: boolean;
}
