// Fetching a federation's metadata: https only (plain http only for a loopback host while the
// service itself runs on localhost: development and tests), a timeout, a cap on the bytes read
// (checked as they arrive, never after buffering everything), no redirects, and conditional GET
// (If-None-Match / If-Modified-Since) so an unchanged aggregate costs a 304.
import { isLoopbackHost } from '../config.ts';
import { badRequest, AppError } from '../errors.ts';

export interface FetchPolicy {
  /** PUBLIC_URL is on localhost: http to a loopback host is allowed */
  development: boolean;
}

export interface FetchOptions {
  etag?: string | null;
  lastModified?: string | null;
  timeoutMs: number;
  maxBytes: number;
}

export type Fetched =
  | { status: 200; body: Buffer; etag: string | null; lastModified: string | null }
  | { status: 304; etag: string | null; lastModified: string | null };

/** A metadata URL as an operator gives it: a clear 400 for anything that may not be fetched. */
export function checkMetadataUrl(value: string, policy: FetchPolicy, what = '--url'): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(`${what} '${value.slice(0, 200)}' is not an absolute URL`);
  }
  if (url.username || url.password) throw badRequest(`${what} must not carry a user name or password`);
  if (url.hash) throw badRequest(`${what} must not have a fragment`);
  const loopback = isLoopbackHost(url.hostname.replace(/^\[|\]$/g, ''));
  if (url.protocol === 'http:' && loopback && policy.development) return url.toString();
  if (url.protocol !== 'https:') {
    throw badRequest(`${what} must be https (plain http only for a loopback host while PUBLIC_URL is on localhost)`);
  }
  return url.toString();
}

/** Why a fetch failed, said without the body of the answer. */
const failed = (message: string) => new AppError(502, message);

async function readCapped(response: Response, maxBytes: number): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) throw failed(`the metadata is larger than the ${maxBytes}-byte limit`);
  const chunks: Buffer[] = [];
  let total = 0;
  const reader = response.body?.getReader();
  if (!reader) return Buffer.alloc(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw failed(`the metadata is larger than the ${maxBytes}-byte limit`);
    }
    chunks.push(Buffer.from(value));
  }
  return Buffer.concat(chunks, total);
}

/** GET the metadata at url (checked by checkMetadataUrl when it was registered). */
export async function fetchMetadata(url: string, options: FetchOptions): Promise<Fetched> {
  const headers: Record<string, string> = { accept: 'application/samlmetadata+xml, application/xml;q=0.9' };
  if (options.etag) headers['if-none-match'] = options.etag;
  if (options.lastModified) headers['if-modified-since'] = options.lastModified;
  let response: Response;
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    response = await fetch(url, { headers, redirect: 'error', signal });
  } catch (err) {
    const timedOut = signal.aborted;
    throw failed(
      timedOut
        ? `no answer from ${url} within ${options.timeoutMs / 1000} s`
        : `cannot fetch ${url}: ${(err as { cause?: { code?: string } }).cause?.code ?? 'connection failed or redirected'}`,
    );
  }
  const etag = response.headers.get('etag');
  const lastModified = response.headers.get('last-modified');
  if (response.status === 304) return { status: 304, etag: etag ?? options.etag ?? null, lastModified };
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => undefined);
    throw failed(`${url} answered HTTP ${response.status}`);
  }
  try {
    return { status: 200, body: await readCapped(response, options.maxBytes), etag, lastModified };
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw failed(
      signal.aborted ? `no complete answer from ${url} within ${options.timeoutMs / 1000} s` : `reading ${url} failed`,
    );
  }
}
