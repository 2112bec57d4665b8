// Where an operator's SP metadata comes from: a file, or an https URL fetched with a time limit and
// a size cap (http only for a loopback host, as for the endpoints in metadata), never following a
// redirect. An upstream provider's logo given as a URL is fetched the same way (src/upstream/logo.ts).
import { readFile, stat } from 'node:fs/promises';
import { badRequest } from '../errors.ts';
import { MAX_SP_METADATA_BYTES } from '../saml/metadata/index.ts';

export interface MetadataSourceOptions {
  /** default 10 s */
  timeoutMs?: number;
  /** default 1 MiB */
  maxBytes?: number;
  /** the option the source was given with, for the messages (default --metadata) */
  option?: string;
  /** the Accept header of a fetch (default: SAML metadata) */
  accept?: string;
}

const METADATA_TYPES = 'application/samlmetadata+xml, application/xml;q=0.9, text/xml;q=0.8';

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/** Whether a source names a URL (scheme://...) rather than a file. */
export const isUrlSource = (source: string) => /^[a-z][a-z0-9+.-]*:\/\//i.test(source);

/** The bytes of the metadata at `source`: a URL (https://, or http:// on a loopback host) or a file path. */
export async function readMetadataSource(source: string, options: MetadataSourceOptions = {}): Promise<Buffer> {
  const maxBytes = options.maxBytes ?? MAX_SP_METADATA_BYTES;
  const option = options.option ?? '--metadata';
  if (isUrlSource(source))
    return fetchMetadata(source, {
      timeoutMs: options.timeoutMs ?? 10_000,
      maxBytes,
      option,
      accept: options.accept ?? METADATA_TYPES,
    });
  let size: number;
  try {
    const info = await stat(source);
    if (!info.isFile()) throw badRequest(`${option} '${source}' is not a file`);
    size = info.size;
  } catch (err) {
    if (err instanceof Error && 'status' in err) throw err;
    throw badRequest(`${option} '${source}' cannot be read: no such file or no permission`);
  }
  if (size > maxBytes) throw badRequest(`${option} '${source}' is larger than ${maxBytes} bytes`);
  return readFile(source);
}

interface FetchOptions {
  timeoutMs: number;
  maxBytes: number;
  option: string;
  accept: string;
}

function metadataUrl(source: string, option: string): URL {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw badRequest(`${option} '${source}' is not a valid URL`);
  }
  const loopbackHttp = url.protocol === 'http:' && LOOPBACK.test(url.hostname);
  if (url.protocol !== 'https:' && !loopbackHttp) {
    throw badRequest(`${option} URL '${source}' must use https (http only for localhost)`);
  }
  return url;
}

async function fetchMetadata(source: string, options: FetchOptions): Promise<Buffer> {
  const { timeoutMs, option } = options;
  const url = metadataUrl(source, option);
  let response: Response;
  try {
    response = await fetch(url, {
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
      headers: { accept: options.accept },
    });
  } catch (err) {
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
      throw badRequest(`${option} URL '${source}' did not answer within ${timeoutMs / 1000} s`);
    }
    throw badRequest(`${option} URL '${source}' could not be fetched (${causeOf(err)})`);
  }
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel();
    const location = response.headers.get('location');
    throw badRequest(
      `${option} URL '${source}' redirects${location ? ` to '${location.slice(0, 300)}'` : ''}; give the final URL`,
    );
  }
  if (response.status !== 200) {
    await response.body?.cancel();
    throw badRequest(`${option} URL '${source}' answered HTTP ${response.status}`);
  }
  return readCapped(response, source, options);
}

async function readCapped(response: Response, source: string, options: FetchOptions): Promise<Buffer> {
  const { timeoutMs, maxBytes, option } = options;
  const declared = Number(response.headers.get('content-length') ?? NaN);
  const tooLarge = () => badRequest(`${option} URL '${source}' sent more than ${maxBytes} bytes`);
  if (declared > maxBytes) {
    await response.body?.cancel();
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body?.getReader();
  try {
    for (let read = await reader?.read(); read && !read.done; read = await reader!.read()) {
      total += read.value.byteLength;
      if (total > maxBytes) {
        await reader!.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(read.value);
    }
  } catch (err) {
    if (err instanceof Error && 'status' in err) throw err;
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
      throw badRequest(`${option} URL '${source}' did not finish within ${timeoutMs / 1000} s`);
    }
    throw badRequest(`${option} URL '${source}' could not be read (${causeOf(err)})`);
  }
  return Buffer.concat(chunks);
}

function causeOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message?.slice(0, 100) ?? 'network error';
}
