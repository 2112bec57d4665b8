// The client's address under TRUST_PROXY: the same trust function is Fastify's trustProxy, so
// request.ip on Fastify's path and clientAddress() on a direct route (direct.ts) agree.
import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import type { Config } from '../config.ts';

/** Whether the proxy at `address`, `hop` hops from the service, is trusted to name the client. */
export type TrustProxy = (address: string, hop: number) => boolean;

/** TRUST_PROXY as a trust function: none, a hop count (the nearest proxies), or addresses/CIDR ranges. */
export function trustProxy(trust: Config['trustProxy']): TrustProxy {
  if (trust === false) return () => false;
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return proxyAddr.compile(trust.split(',').map((range) => range.trim()));
}

/** The address of the client: the socket's, or the nearest X-Forwarded-For hop not trusted. */
export function clientAddress(req: IncomingMessage, trust: TrustProxy): string {
  const addresses = proxyAddr.all(req, trust);
  return addresses[addresses.length - 1] ?? '';
}
