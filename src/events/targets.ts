// Where events may be sent, and the one way they are sent. Receiver URLs are https; plain http
// only for a loopback receiver while the service itself runs on localhost (development, tests).
// Private, loopback, link-local and other special-use addresses are refused unless the operator
// allows them (EVENTS_ALLOW_PRIVATE_TARGETS), both when a URL is registered (an address literal)
// and when its name resolves at delivery (the connection is made to the address checked).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { isLoopbackHost, type Config } from '../config.ts';
import { badRequest } from '../errors.ts';
import { withTraceContext } from '../http/tracing.ts';

/** How long a receiver has to answer. */
const TIMEOUT_MS = 5000;
/** The most of an answer that is read (and kept as the error text). */
const MAX_ANSWER = 4096;

export interface TargetPolicy {
  /** PUBLIC_URL is on localhost: loopback receivers over plain http are allowed */
  development: boolean;
  allowPrivate: boolean;
}

export function targetPolicy(config: Config): TargetPolicy {
  return {
    development: isLoopbackHost(new URL(config.publicUrl).hostname),
    allowPrivate: config.eventsAllowPrivateTargets,
  };
}

/** Public unicast only: no private, loopback, link-local, multicast, reserved or unspecified address. */
function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  return ipaddr.process(address).range() === 'unicast';
}

function allowedAddress(address: string, policy: TargetPolicy): boolean {
  if (isPublicAddress(address) || policy.allowPrivate) return true;
  return policy.development && ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';
}

/** A receiver URL as registered: a clear 400 for anything that may not be one. */
export function checkTargetUrl(value: string, policy: TargetPolicy, what = 'url'): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badRequest(`${what} '${value}' is not an absolute URL`);
  }
  if (url.username || url.password) throw badRequest(`${what} must not carry credentials`);
  if (url.hash) throw badRequest(`${what} must not have a fragment`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const loopback = isLoopbackHost(host);
  if (url.protocol === 'http:') {
    if (!(loopback && policy.development))
      throw badRequest(
        `${what} must be https (plain http only for a loopback receiver while PUBLIC_URL is on localhost)`,
      );
  } else if (url.protocol !== 'https:') {
    throw badRequest(`${what} must be an https URL`);
  }
  if (ipaddr.isValid(host) && !allowedAddress(host, policy))
    throw badRequest(`${what} points at a private or special-use address (EVENTS_ALLOW_PRIVATE_TARGETS allows it)`);
  if (loopback && !ipaddr.isValid(host) && !(policy.development || policy.allowPrivate))
    throw badRequest(`${what} points at a loopback host (EVENTS_ALLOW_PRIVATE_TARGETS allows it)`);
  return url.toString();
}

/** dns.lookup that refuses names resolving to an address the policy does not allow. */
export function checkedLookup(policy: TargetPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 4);
      const refused = addresses.find((a) => !allowedAddress(a.address, policy));
      if (refused || addresses.length === 0) {
        const error = Object.assign(new Error(`${hostname} resolves to a private or special-use address`), {
          code: 'EADDRNOTALLOWED',
        });
        return callback(error, '', 4);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** Connections to receivers are kept open between deliveries (a busy outbox sends many). */
const agents = new WeakMap<TargetPolicy, { http: HttpAgent; https: HttpsAgent }>();

function agentsOf(policy: TargetPolicy) {
  let pair = agents.get(policy);
  if (!pair) {
    const options = { keepAlive: true, maxSockets: 16, timeout: TIMEOUT_MS };
    pair = { http: new HttpAgent(options), https: new HttpsAgent(options) };
    agents.set(policy, pair);
  }
  return pair;
}

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** POSTs body to url under the policy: no redirects followed, a 5 s limit, at most 4 KiB of answer read. */
export function post(
  target: string,
  body: string,
  headers: Record<string, string>,
  policy: TargetPolicy,
): Promise<Answer> {
  const url = new URL(target);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(host) && !allowedAddress(host, policy))
    return Promise.reject(new Error(`${host} is a private or special-use address`));
  const options: RequestOptions = {
    method: 'POST',
    // the delivery's trace context (traceparent) when traces are on
    headers: {
      ...withTraceContext({ ...headers }),
      'content-length': Buffer.byteLength(body),
      'user-agent': 'passkey-idp-events',
    },
    lookup: checkedLookup(policy),
    timeout: TIMEOUT_MS,
    agent: url.protocol === 'https:' ? agentsOf(policy).https : agentsOf(policy).http,
  };
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size < MAX_ANSWER) chunks.push(chunk.subarray(0, MAX_ANSWER - size));
        size += chunk.length;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
    req.end(body);
  });
}
