// The OpenTelemetry SDK, loaded by tracing.ts only when OTEL_EXPORTER_OTLP_ENDPOINT is set. Spans are
// batched and sent as OTLP/HTTP JSON; the SDK reads the standard variables itself (the endpoint,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// its argument, OTEL_BSP_*). Request spans come from @fastify/otel, a Fastify plugin registered on
// the app (nothing is patched). Query spans are made from the store's per-query listener (Kysely's
// log events: the statement kind and its duration, never its text or parameters) rather than the pg
// instrumentation, which needs module loader hooks, and would cover PostgreSQL only.
import type { IncomingMessage } from 'node:http';
import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  type ReadableSpan,
  type Span as SdkSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVICE_NAME,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import { FastifyOtelInstrumentation } from '@fastify/otel';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { QueryTiming } from '../store/index.ts';
import { REQUEST_ID_ATTRIBUTE, type DirectFields, type Tracing } from './tracing-types.ts';

const SERVICE_NAME = 'passkey-idp';
const TRACER = 'passkey-idp';

/** Every span started under a request's span carries the request's id too. */
class RequestIdOnChildren implements SpanProcessor {
  onStart(span: SdkSpan, parent: Context): void {
    const id = (trace.getSpan(parent) as Partial<ReadableSpan> | undefined)?.attributes?.[REQUEST_ID_ATTRIBUTE];
    if (id !== undefined) span.setAttribute(REQUEST_ID_ATTRIBUTE, id);
  }
  onEnd(): void {}
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Attributes that never leave in a span: the client's address (unless TRACES_CLIENT_ADDRESS), a query string, a URL in full. */
const PERSONAL = [
  'client.port',
  'network.peer.address',
  'network.peer.port',
  'url.full',
  'url.query',
  'user_agent.original',
];

/**
 * What a span may carry out of the service, whatever put it there (our spans, @fastify/otel, the
 * SDK): no exception message or stack (a message can quote a token, an e-mail address, a SQL
 * error), only the exception's type; no status description (@fastify/otel copies the message
 * there); no client address unless TRACES_CLIENT_ADDRESS; no query string.
 */
export function exportable(span: ReadableSpan, clientAddress: boolean): ReadableSpan {
  const attributes: Attributes = {};
  for (const [name, value] of Object.entries(span.attributes)) {
    if (PERSONAL.includes(name) || (name === ATTR_CLIENT_ADDRESS && !clientAddress)) continue;
    attributes[name] = value;
  }
  const events = span.events.map((event) => {
    if (event.name !== 'exception') return event;
    const type = event.attributes?.['exception.type'];
    return { ...event, attributes: type === undefined ? {} : { 'exception.type': type } };
  });
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: { code: span.status.code },
    attributes,
    links: span.links,
    events,
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

/** The OTLP exporter, given only what exportable() leaves of each span. */
class ExportableOnly implements SpanExporter {
  private readonly inner: SpanExporter;
  private readonly clientAddress: boolean;
  constructor(inner: SpanExporter, clientAddress: boolean) {
    this.inner = inner;
    this.clientAddress = clientAddress;
  }
  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.inner.export(
      spans.map((s) => exportable(s, this.clientAddress)),
      done,
    );
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The path a span names, as the request log does (src/app.ts): a route with parameters by its
 * pattern (paths can carry personal data), and never the query string (it can carry tokens).
 */
function pathOf(request: FastifyRequest): string {
  const pattern = request.routeOptions?.url;
  return pattern?.includes(':') ? pattern : request.url.split('?')[0]!;
}

/** Request spans on Fastify's path: @fastify/otel, named and described as the request log does. */
function requestSpans(provider: NodeTracerProvider): FastifyOtelInstrumentation {
  const requests = new FastifyOtelInstrumentation({
    // a span per request and one for its handler; none per hook (the service has a dozen on every request)
    instrumentHooks: false,
    requestHook(span, request) {
      const route = request.routeOptions?.url;
      span.updateName(route ? `${request.method} ${route}` : request.method);
      span.setAttributes({
        [REQUEST_ID_ATTRIBUTE]: request.id,
        [ATTR_URL_PATH]: pathOf(request),
        [ATTR_CLIENT_ADDRESS]: request.ip,
      });
    },
  });
  requests.setTracerProvider(provider);
  return requests;
}

/** The span of a request answered before Fastify's routing, with work run inside it. */
function directRequest(tracer: Tracer, req: IncomingMessage, fields: DirectFields, work: () => void) {
  const parent = fields.trusted ? propagation.extract(context.active(), req.headers) : context.active();
  const span = tracer.startSpan(
    `${fields.method} ${fields.route}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: fields.method,
        [ATTR_HTTP_ROUTE]: fields.route,
        [ATTR_URL_PATH]: fields.route,
        [ATTR_CLIENT_ADDRESS]: fields.clientAddress,
        [REQUEST_ID_ATTRIBUTE]: fields.id,
      },
    },
    parent,
  );
  context.with(trace.setSpan(parent, span), work);
  return {
    end(status: number) {
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}

export function startSdk(options: { clientAddress: boolean }): Tracing {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: SERVICE_NAME }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [
      new RequestIdOnChildren(),
      new BatchSpanProcessor(new ExportableOnly(new OTLPTraceExporter(), options.clientAddress)),
    ],
  });
  // W3C trace context only: no baggage is taken from callers.
  provider.register({ propagator: new W3CTraceContextPropagator() });
  const tracer = trace.getTracer(TRACER);
  const requests = requestSpans(provider);

  return {
    span<T>(name: string, attributes: Attributes, work: () => Promise<T>): Promise<T> {
      return tracer.startActiveSpan(name, { attributes }, async (span: Span) => {
        try {
          return await work();
        } catch (err) {
          // the type only: a message can carry what must not leave the service (exportable())
          span.setStatus({ code: SpanStatusCode.ERROR });
          span.setAttribute('error.type', (err as Error)?.name ?? 'Error');
          throw err;
        } finally {
          span.end();
        }
      });
    },
    query(system: string, timing: QueryTiming): void {
      const parent = context.active();
      if (!trace.getSpan(parent)) return; // background polling would make a trace of every query
      const end = Date.now();
      const span = tracer.startSpan(
        timing.kind,
        {
          kind: SpanKind.CLIENT,
          startTime: end - timing.seconds * 1000,
          attributes: { 'db.system.name': system, 'db.operation.name': timing.kind },
        },
        parent,
      );
      if (timing.failed) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(end);
    },
    async register(app: FastifyInstance): Promise<void> {
      await app.register(requests.plugin());
    },
    direct: (req: IncomingMessage, fields: DirectFields, work: () => void) => directRequest(tracer, req, fields, work),
    inject(headers: Record<string, string>): void {
      propagation.inject(context.active(), headers);
    },
    async shutdown(): Promise<void> {
      requests.disable();
      await provider.shutdown();
    },
  };
}
