// OpenTelemetry traces, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set. This module is what the rest
// of the service calls; it imports nothing from OpenTelemetry. startTracing() loads the SDK
// (tracing-sdk.ts, a dynamic import) only when the endpoint is set: otherwise every function here
// is a check of one variable and the work itself, and no OpenTelemetry module is ever loaded.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Store } from '../store/index.ts';
import type { TrustProxy } from './client-address.ts';

import type { DirectFields, SpanAttributes, Tracing } from './tracing-types.ts';

export { REQUEST_ID_ATTRIBUTE } from './tracing-types.ts';

let active: Tracing | undefined;

/** Starts the SDK when OTEL_EXPORTER_OTLP_ENDPOINT is set (each process its own: every worker calls it). */
export async function startTracing(
  endpoint: string | undefined,
  options: { clientAddress: boolean } = { clientAddress: false },
): Promise<boolean> {
  if (!endpoint || active) return active !== undefined;
  const sdk = await import('./tracing-sdk.ts');
  active = sdk.startSdk(options);
  return true;
}

/** Exports the spans still buffered; a no-op when traces are off. */
export async function stopTracing(): Promise<void> {
  const stopping = active;
  active = undefined;
  await stopping?.shutdown();
}

export function tracingOn(): boolean {
  return active !== undefined;
}

/** work() in a span when traces are on; work() alone otherwise. */
export function inSpan<T>(name: string, attributes: SpanAttributes, work: () => Promise<T>): Promise<T> {
  return active ? active.span(name, attributes, work) : work();
}

/** headers with the active trace context added (W3C traceparent) when traces are on. */
export function withTraceContext(headers: Record<string, string>): Record<string, string> {
  active?.inject(headers);
  return headers;
}

/** A span per request answered before Fastify's routing; undefined when traces are off. */
export function directSpan(
  req: IncomingMessage,
  fields: DirectFields,
  work: () => void,
): { end(status: number): void } | undefined {
  if (!active) {
    work();
    return undefined;
  }
  return active.direct(req, fields, work);
}

/**
 * Request spans and query spans for an app. A caller's traceparent is honoured only from a trusted
 * proxy (TRUST_PROXY trusts the nearest peer); any other caller's is dropped, so its request starts
 * a new trace instead of joining (or forging a place in) one it names.
 */
export async function traceApp(app: FastifyInstance, store: Store, trust: TrustProxy): Promise<void> {
  const tracing = active;
  if (!tracing) return;
  app.addHook('onRequest', (request, _reply, done) => {
    if (!trustedPeer(request.raw, trust)) {
      delete request.headers.traceparent;
      delete request.headers.tracestate;
    }
    done();
  });
  await tracing.register(app);
  const system = store.dialect === 'postgres' ? 'postgresql' : 'sqlite';
  const stop = store.onQuery?.((timing) => tracing.query(system, timing));
  app.addHook('onClose', async () => stop?.());
}

/** Whether the peer that sent the request is a proxy TRUST_PROXY trusts. */
export function trustedPeer(req: IncomingMessage, trust: TrustProxy): boolean {
  const peer = req.socket.remoteAddress;
  return peer !== undefined && trust(peer, 0);
}
