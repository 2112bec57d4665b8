// The one typed configuration of the service, read from the environment.
// SETTINGS is the single definition of every setting: its name, documented default, meaning and
// parser. loadConfig reads the environment only through it, and README's table is generated from it.
import { readAaguidData, type AaguidData } from './authenticators.ts';
import { accessSync, constants, mkdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import ipaddr from 'ipaddr.js';
import { RESERVED_NAMESPACES } from './vocabulary.ts';
import { BrandError, brandColor, brandFooter, brandName, brandUrl, readLogoFile, type Brand } from './brand.ts';

/** A directory the service keeps files in, and the variable that named it (undefined: the default). */
export interface StorageDirectory {
  path: string;
  variable: 'DATA_DIR' | 'DATABASE_URL' | undefined;
  holds: 'database' | 'secret';
}

export interface Config {
  port: number;
  host: string;
  publicUrl: string; // origin only, no trailing slash: the issuer and base of every absolute URL
  /** true when PUBLIC_URL is plain http on a host that is not loopback (ALLOW_INSECURE_PUBLIC_URL) */
  allowInsecurePublicUrl: boolean;
  databaseUrl: string; // a SQLite file path, ':memory:', or postgres://...
  dialect: 'sqlite' | 'postgres';
  idpSecret: string | undefined; // resolved to a value by loadSecret() before use
  /** the master secret before the last `secret rotate`, accepted (never used to seal or sign) during the transition */
  idpSecretPrevious?: string | undefined;
  dataDir: string;
  /** the directories checkStorage() verifies before start-up */
  storage: StorageDirectory[];
  logLevel: string;
  /** processes serving on the one port (node:cluster); 1 runs no cluster */
  workers: number;
  accessTokenTtl: number; // seconds
  idTokenTtl: number; // seconds
  paginationTokenTtl: number; // seconds
  deviceCodeTtl: number; // seconds a device authorization (device and user code) stays valid
  keyRefreshInterval: number; // seconds between checks for rotated signing keys
  keyRotationDays: number; // age at which the signing keys are rotated; 0: only by `keys rotate`
  /** seconds without requests after which the service gives memory back (src/memory.ts); 0: never */
  memoryReleaseIdle: number;
  /** Fastify trustProxy: false, a hop count, or trusted proxy addresses/CIDR ranges */
  trustProxy: false | number | string;
  claimsNamespace: string;
  idpNamespace: string; // namespace of userid_sec for the directory's own eppn ids
  sunsetDate: string | undefined; // HTTP-date for Sunset on deprecated endpoints
  userinfoCacheTtl: number; // seconds userinfo claims are kept per access token at most (0: never)
  auditRetentionDays: number; // audit records older than this many days are pruned
  eventsRetryBaseMs: number; // wait after a delivery's first failed attempt; each later wait is 3x longer
  eventsDeadLetterSeconds: number; // a delivery still failing this long after its event is given up
  eventsAllowPrivateTargets: boolean; // webhooks and push streams may reach private and loopback addresses
  /** the SMTP server mail leaves through (smtp:// or smtps://, credentials in the URL); unset: no mail */
  smtpUrl: string | undefined;
  /** the From address of every message (an address, or `Name <address>`) */
  smtpFrom: string | undefined;
  samlFederationMaxMb: number; // the largest federation metadata aggregate fetched and parsed, in MB
  checkuserRateLimit: number; // lookups per client per minute
  loginRateLimitAccount: number; // failed logins per account per 15 minutes
  loginRateLimitIp: number; // login attempts per client IP per 15 minutes
  passwordHashConcurrency: number; // password hashes computed at once per process
  passwordHashQueue: number; // password hashes that may wait for a place; more are refused with 503
  ldapPasswordCheckConcurrency: number; // LDAP directory password checks at once per directory and process
  ldapPasswordCheckQueue: number; // LDAP password checks that may wait (2 s at most) for a place; more: 503
  databaseConnectTimeoutMs: number; // PostgreSQL: opening a connection, or waiting for a free one of the pool
  databaseStatementTimeoutMs: number; // PostgreSQL: one statement, on the server (and a little more on the client)
  metricsToken: string | undefined; // bearer token every /metrics scrape must present, when set
  metricsAllow: string[]; // CIDR ranges /metrics answers
  tracesEndpoint: string | undefined; // OTLP/HTTP collector base URL; traces are off when unset
  /** TRACES_CLIENT_ADDRESS: request spans carry the client's IP address (client.address); off by default */
  tracesClientAddress: boolean;
  webauthnRelatedOrigins: string[]; // other origins that may use PUBLIC_URL's RP ID (/.well-known/webauthn)
  webauthnHints: { registration: WebAuthnHint[]; authentication: WebAuthnHint[] }; // WebAuthn hints per ceremony
  passkeyUpgradeSnoozeSeconds: number; // how long "Not now" on the passkey offer is remembered
  upstreamTimeoutMs: number; // how long an upstream identity provider may take to answer one request
  consoleRequirePasskey: boolean; // staff sign in to /console with a passkey (the phishing-resistant class)
  consoleIdleTimeoutSeconds: number; // a console session ends after this long without a request
  aaguidData: AaguidData | undefined; // authenticator names and icons over the shipped list (AAGUID_DATA_FILE)
  /** the deployment's branding (BRAND_*); an organization's own branding goes over it */
  brand: Brand;
  /** Organization and ContactPerson of the SAML identity provider's metadata (SAML_*) */
  saml: SamlMetadataSettings;
}

export interface SamlMetadataSettings {
  organizationName?: string;
  organizationUrl?: string;
  technicalContact?: string;
  supportContact?: string;
}

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.variable = variable;
  }
}

export interface Setting {
  name: string;
  /** the default as documented */
  default: string;
  meaning: string;
  /** raw is undefined when the variable is unset or empty; earlier settings' results are in soFar */
  parse(raw: string | undefined, soFar: Partial<Config>): Partial<Config>;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const URL_SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
const DEFAULT_DATA_DIR = './data';
const DEFAULT_METRICS_ALLOW = ['127.0.0.0/8', '::1/128', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'];

function int(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got '${raw}'`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function intSetting(
  name: string,
  key: keyof Config,
  fallback: number,
  min: number,
  max: number,
  meaning: string,
): Setting {
  return { name, default: String(fallback), meaning, parse: (raw) => ({ [key]: int(name, raw, fallback, min, max) }) };
}

const HINTS = ['security-key', 'client-device', 'hybrid'] as const;
export type WebAuthnHint = (typeof HINTS)[number];

function hintList(name: string, raw: string | undefined): WebAuthnHint[] {
  const hints = (raw ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  const unknown = hints.find((h) => !(HINTS as readonly string[]).includes(h));
  if (unknown) throw new ConfigError(name, `'${unknown}' is not a WebAuthn hint (${HINTS.join(', ')})`);
  return [...new Set(hints as WebAuthnHint[])];
}

function originList(name: string, raw: string | undefined): string[] {
  const origins = (raw ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  for (const origin of origins) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || url.origin !== origin || (url.protocol !== 'https:' && url.hostname !== 'localhost'))
      throw new ConfigError(name, `'${origin}' is not an https origin (scheme and host, no path or trailing slash)`);
  }
  return [...new Set(origins)];
}

function flag(name: string, raw: string | undefined): boolean {
  if (raw === undefined || /^(false|0|no|off)$/i.test(raw)) return false;
  if (/^(true|1|yes|on)$/i.test(raw)) return true;
  throw new ConfigError(name, `must be true or false, got '${raw}'`);
}

/** One IP address or CIDR range, written plainly (four-part decimal IPv4, or IPv6); normalized. */
export function parseRange(entry: string): [ipaddr.IPv4 | ipaddr.IPv6, number] | undefined {
  const [address = '', bits, extra] = entry.split('/');
  if (extra !== undefined || (bits !== undefined && !/^\d{1,3}$/.test(bits))) return undefined;
  if (!ipaddr.IPv4.isValidFourPartDecimal(address) && !(address.includes(':') && ipaddr.IPv6.isValid(address)))
    return undefined;
  try {
    return bits === undefined ? [ipaddr.parse(address), address.includes(':') ? 128 : 32] : ipaddr.parseCIDR(entry);
  } catch {
    return undefined;
  }
}

function rangeList(name: string, raw: string): string[] {
  const entries = raw.split(',').map((e) => e.trim());
  for (const e of entries) {
    if (!parseRange(e))
      throw new ConfigError(
        name,
        `'${e}' is not an IP address or CIDR range (such as 10.0.0.0/8 or fd00::/8); fix or remove it`,
      );
  }
  return entries;
}

const MAX_WORKERS = 64;

/** WORKERS: a count, or `auto` for the cores this process may use. */
function workers(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  const value = raw === undefined || raw === '' ? '1' : raw.trim().toLowerCase();
  const count = value === 'auto' ? availableParallelism() : /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(count) || count < 1 || count > MAX_WORKERS)
    throw new ConfigError('WORKERS', `must be a number of processes from 1 to ${MAX_WORKERS}, or auto, got '${raw}'`);
  if (count > 1 && soFar.databaseUrl === ':memory:')
    throw new ConfigError(
      'WORKERS',
      `${count} processes cannot share DATABASE_URL=:memory: (each process would have its own database); use a file or PostgreSQL, or WORKERS=1`,
    );
  return { workers: Math.min(count, MAX_WORKERS) };
}

function trustProxy(raw: string | undefined): Config['trustProxy'] {
  if (raw === undefined || /^(0|false|no|off)$/i.test(raw)) return false;
  if (/^(true|yes|on)$/i.test(raw)) {
    throw new ConfigError(
      'TRUST_PROXY',
      'true would trust every X-Forwarded-For hop (clients could choose their IP); give the number of proxies in front, e.g. 1, or their addresses/CIDR ranges',
    );
  }
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops < 1 || hops > 10) throw new ConfigError('TRUST_PROXY', `hop count must be between 1 and 10, got ${hops}`);
    return hops;
  }
  return rangeList('TRUST_PROXY', raw).join(',');
}

/** localhost, *.localhost and loopback addresses: browsers treat plain http there as a secure context. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
}

function origin(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be an absolute http(s) URL, got '${raw}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError(name, `must use http or https, got '${url.protocol}'`);
  if (url.pathname !== '/' || url.search || url.hash || url.username || url.password) {
    throw new ConfigError(
      name,
      `must be an origin only (scheme://host[:port]), without path, query or credentials, got '${raw}'`,
    );
  }
  return url.origin;
}

function publicUrl(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  if (raw === undefined && soFar.port === 0) {
    throw new ConfigError(
      'PORT',
      'is 0 (any free port), but the issuer URL is built from the port when PUBLIC_URL is unset; set PUBLIC_URL, or choose a fixed PORT',
    );
  }
  return { publicUrl: origin('PUBLIC_URL', raw ?? `http://localhost:${soFar.port}`) };
}

function allowInsecure(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  const allowed = flag('ALLOW_INSECURE_PUBLIC_URL', raw);
  const url = new URL(soFar.publicUrl!);
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !allowed) {
    throw new ConfigError(
      'PUBLIC_URL',
      `must be https unless the host is localhost (passkeys and secure cookies need a secure context), got '${soFar.publicUrl}'; use the https address clients see, or set ALLOW_INSECURE_PUBLIC_URL=true to run on plain http anyway`,
    );
  }
  return { allowInsecurePublicUrl: allowed && url.protocol === 'http:' && !isLoopbackHost(url.hostname) };
}

function database(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  const dataDirGiven = soFar.dataDir;
  const databaseUrl = raw ?? `${(dataDirGiven ?? DEFAULT_DATA_DIR).replace(/\/$/, '')}/idp.sqlite`;
  let dialect: Config['dialect'] = 'sqlite';
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    dialect = 'postgres';
    try {
      new URL(databaseUrl);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
  } else if (URL_SCHEME.test(databaseUrl)) {
    throw new ConfigError(
      'DATABASE_URL',
      `must be a SQLite file path or a postgres:// URL, got a '${databaseUrl.split(':')[0]}:' URL`,
    );
  }
  // The generated secret lives beside the SQLite file it protects unless DATA_DIR says otherwise.
  const sqliteFile = dialect === 'sqlite' && databaseUrl !== ':memory:';
  const dataDir = dataDirGiven ?? (sqliteFile ? dirname(databaseUrl) : DEFAULT_DATA_DIR);
  const storage: StorageDirectory[] = [];
  if (dialect === 'sqlite')
    storage.push({
      path: dataDir,
      variable: dataDirGiven !== undefined ? 'DATA_DIR' : raw !== undefined && sqliteFile ? 'DATABASE_URL' : undefined,
      holds: 'secret',
    });
  if (sqliteFile)
    storage.push({
      path: dirname(databaseUrl),
      variable: raw !== undefined ? 'DATABASE_URL' : dataDirGiven !== undefined ? 'DATA_DIR' : undefined,
      holds: 'database',
    });
  return { databaseUrl, dialect, dataDir, storage };
}

function secret(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  if (raw !== undefined && raw.length < 32)
    throw new ConfigError('IDP_SECRET', `must be at least 32 characters, got ${raw.length}`);
  if (soFar.dialect === 'postgres' && raw === undefined) {
    throw new ConfigError('IDP_SECRET', 'is required with PostgreSQL (every instance must share the same secret)');
  }
  return { idpSecret: raw };
}

function previousSecret(raw: string | undefined): Partial<Config> {
  if (raw !== undefined && raw.length < 32)
    throw new ConfigError('IDP_SECRET_PREVIOUS', `must be at least 32 characters, got ${raw.length}`);
  return { idpSecretPrevious: raw };
}

function claimsNamespace(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  const value = (raw ?? `${soFar.publicUrl}/claims`).replace(/\/$/, '');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('CLAIMS_NAMESPACE', `must be an absolute URL prefix, got '${value}'`);
  }
  // https, as claim names published to relying parties; http only beside a service on localhost (development)
  const local = new URL(soFar.publicUrl!);
  const devHttp = url.protocol === 'http:' && local.protocol === 'http:' && isLoopbackHost(local.hostname);
  if (url.protocol !== 'https:' && !devHttp) {
    throw new ConfigError(
      'CLAIMS_NAMESPACE',
      `must be an https URL prefix (http only when PUBLIC_URL is http on localhost), got '${value}'; set CLAIMS_NAMESPACE=https://...`,
    );
  }
  return { claimsNamespace: value };
}

function idpNamespace(raw: string | undefined): Partial<Config> {
  const value = raw ?? 'idp';
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(value)) {
    throw new ConfigError(
      'IDP_NAMESPACE',
      `must be lowercase letters, digits, '-' or '_' starting with a letter, got '${value}'`,
    );
  }
  if (RESERVED_NAMESPACES.includes(value))
    throw new ConfigError('IDP_NAMESPACE', `'${value}' already names another kind of user id`);
  return { idpNamespace: value };
}

function sunsetDate(raw: string | undefined): Partial<Config> {
  if (raw === undefined) return { sunsetDate: undefined };
  const d = /^\d{4}-\d{2}-\d{2}$/.test(raw) ? new Date(`${raw}T00:00:00Z`) : new Date(NaN);
  if (Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== raw) {
    throw new ConfigError('SUNSET_DATE', `must be a calendar date YYYY-MM-DD, got '${raw}'`);
  }
  return { sunsetDate: d.toUTCString() };
}

const MAIL_ADDRESS = /^[^\s@<>"(),;:\\]+@[^\s@<>"(),;:\\]+\.[^\s@<>"(),;:\\]+$/;

function smtpUrl(raw: string | undefined): Partial<Config> {
  if (raw === undefined) return { smtpUrl: undefined };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // the value may hold a password: never repeated in the message
    throw new ConfigError('SMTP_URL', 'is not a URL; write smtp://user:password@host:587 or smtps://host:465');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:')
    throw new ConfigError('SMTP_URL', `must be an smtp:// or smtps:// URL, got ${url.protocol}//`);
  if (!url.hostname) throw new ConfigError('SMTP_URL', 'names no host');
  if (url.pathname && url.pathname !== '/')
    throw new ConfigError('SMTP_URL', 'must not have a path (smtp://user:password@host:port)');
  return { smtpUrl: raw };
}

function smtpFrom(raw: string | undefined, soFar: Partial<Config>): Partial<Config> {
  if (raw === undefined) {
    if (soFar.smtpUrl !== undefined) throw new ConfigError('SMTP_FROM', 'is required when SMTP_URL is set');
    return { smtpFrom: undefined };
  }
  const address = /<([^<>]*)>\s*$/.exec(raw)?.[1] ?? raw.trim();
  if (!MAIL_ADDRESS.test(address) || /[\r\n]/.test(raw))
    throw new ConfigError('SMTP_FROM', `must be an address or 'Name <address>', got '${raw}'`);
  return { smtpFrom: raw.trim() };
}

/** OTEL_EXPORTER_OTLP_ENDPOINT: an http(s) URL; the OpenTelemetry SDK reads it (and the other OTEL_* variables) itself. */
function tracesEndpoint(raw: string | undefined): Partial<Config> {
  if (raw === undefined) return { tracesEndpoint: undefined };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('OTEL_EXPORTER_OTLP_ENDPOINT', `not a URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError('OTEL_EXPORTER_OTLP_ENDPOINT', `must be an http or https URL, got ${url.protocol}`);
  return { tracesEndpoint: raw };
}

function metricsToken(raw: string | undefined): Partial<Config> {
  if (raw !== undefined && raw.length < 32)
    throw new ConfigError(
      'METRICS_TOKEN',
      `must be at least 32 characters, got ${raw.length}; generate one with: openssl rand -base64 32`,
    );
  // RFC 6750's token characters: what a client can send after `Bearer `
  if (raw !== undefined && !/^[A-Za-z0-9\-._~+/]+=*$/.test(raw))
    throw new ConfigError(
      'METRICS_TOKEN',
      'may hold only letters, digits and - . _ ~ + / (then = padding); generate one with: openssl rand -base64 32',
    );
  return { metricsToken: raw };
}

/** A SAML_* metadata setting: unset leaves the field out. */
function samlSetting(
  name: string,
  key: keyof SamlMetadataSettings,
  meaning: string,
  check: (raw: string) => string,
): Setting {
  return {
    name,
    default: '(unset)',
    meaning,
    parse(raw, soFar) {
      const saml = { ...soFar.saml };
      if (raw !== undefined) saml[key] = check(raw.trim());
      if (key === 'organizationUrl' && (saml.organizationName === undefined) !== (saml.organizationUrl === undefined))
        throw new ConfigError(
          name,
          'SAML_ORGANIZATION_NAME and SAML_ORGANIZATION_URL go together: set both or neither',
        );
      return { saml };
    },
  };
}

function samlOrganizationName(raw: string): string {
  if (raw.length > 200 || /[\p{Cc}\p{Cf}]/u.test(raw))
    throw new ConfigError('SAML_ORGANIZATION_NAME', 'must be at most 200 characters without control characters');
  return raw;
}

function samlUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('SAML_ORGANIZATION_URL', `must be an absolute https URL, got '${raw}'`);
  }
  if (url.protocol !== 'https:') throw new ConfigError('SAML_ORGANIZATION_URL', `must use https, got '${raw}'`);
  return url.toString();
}

function samlContact(name: string): (raw: string) => string {
  return (raw) => {
    if (!/^[^\s@<>"]{1,64}@[^\s@<>"]{1,255}$/.test(raw))
      throw new ConfigError(name, `must be an e-mail address, got '${raw}'`);
    return raw;
  };
}

/** A BRAND_* setting: unset leaves the field out; a refused value is a configuration error. */
function brandSetting(
  name: string,
  key: keyof Brand,
  meaning: string,
  check: (raw: string) => Brand[keyof Brand],
): Setting {
  return {
    name,
    default: '(unset)',
    meaning,
    parse: (raw, soFar) => {
      if (raw === undefined) return { brand: soFar.brand ?? {} };
      try {
        return { brand: { ...soFar.brand, [key]: check(raw) } };
      } catch (err) {
        if (err instanceof BrandError) throw new ConfigError(name, err.message);
        throw err;
      }
    },
  };
}

/** Every setting, in the order they are read (later defaults depend on earlier values) and documented. */
export const SETTINGS: Setting[] = [
  intSetting('PORT', 'port', 8080, 0, 65535, 'TCP port to listen on. 0 (any free port) only together with PUBLIC_URL'),
  {
    name: 'HOST',
    default: '127.0.0.1',
    meaning:
      'Address to bind; use 0.0.0.0 (or ::) in a container or behind a load balancer. One address: a name such as localhost binds the first address it resolves to',
    parse: (raw) => ({ host: raw ?? '127.0.0.1' }),
  },
  {
    name: 'PUBLIC_URL',
    default: 'http://localhost:<PORT>',
    meaning:
      'External origin (scheme://host[:port], no path) as clients see it. It is the OIDC issuer and the base of every absolute URL the service emits (discovery, Link headers, photo URLs), whatever Host header a proxy forwards. Must be https, except on localhost (localhost, *.localhost, 127.0.0.0/8, ::1)',
    parse: publicUrl,
  },
  {
    name: 'ALLOW_INSECURE_PUBLIC_URL',
    default: 'false',
    meaning:
      'true accepts a plain-http PUBLIC_URL on a host that is not localhost (a closed test network); the service logs a warning at start. Browsers refuse passkeys there',
    parse: allowInsecure,
  },
  {
    name: 'DATA_DIR',
    default: './data, or the directory of DATABASE_URL when that is a SQLite file',
    meaning:
      'Existing writable directory for the default SQLite file and the generated secret. Only the default ./data is created when missing (the log says so)',
    parse: (raw) => ({ dataDir: raw }),
  },
  {
    name: 'DATABASE_URL',
    default: './data/idp.sqlite (<DATA_DIR>/idp.sqlite when DATA_DIR is set)',
    meaning:
      'A SQLite file path (embedded default) or a postgres:// URL shared by several instances. The directory of a SQLite file must exist',
    parse: database,
  },
  intSetting(
    'DATABASE_CONNECT_TIMEOUT_MS',
    'databaseConnectTimeoutMs',
    5000,
    100,
    120_000,
    'PostgreSQL: how long a request waits to open a connection, or for a free one of the pool, before it is answered 503 with `Retry-After` (docs/operations.md, Database outages)',
  ),
  intSetting(
    'DATABASE_STATEMENT_TIMEOUT_MS',
    'databaseStatementTimeoutMs',
    15_000,
    100,
    3_600_000,
    "PostgreSQL: the longest one statement may run (the server's statement_timeout); the client gives up on a server that does not answer 2 seconds later. Migrations are not bound by it",
  ),
  {
    name: 'IDP_SECRET',
    default: '(generated for SQLite)',
    meaning:
      'Master secret, at least 32 characters. Signing keys, SAML keys, webhook secrets and LDAP bind passwords are sealed under it; pagination cursors, cookies and CSRF tokens are keyed from it. `npm run idp -- secret rotate` replaces it (docs/operations.md, Replacing the master secret). With SQLite and none given, `npm start` generates one on first start into <DATA_DIR>/idp-secret (mode 0600); admin commands never generate one. Required with PostgreSQL, and must be the same on every instance',
    parse: secret,
  },
  {
    name: 'IDP_SECRET_PREVIOUS',
    default: '(none)',
    meaning:
      'The master secret before the last `npm run idp -- secret rotate`, during the transition only (docs/operations.md, Replacing the master secret): values sealed and cookies, CSRF tokens and console sessions signed under it are still accepted, nothing new is sealed or signed with it. With SQLite and a generated secret, <DATA_DIR>/idp-secret.previous plays this part. Remove it once every instance runs on the new secret and `secret reseal` has run',
    parse: previousSecret,
  },
  {
    name: 'LOG_LEVEL',
    default: 'info',
    meaning: 'fatal, error, warn, info, debug, trace or silent',
    parse: (raw) => {
      if (raw !== undefined && !LOG_LEVELS.includes(raw))
        throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got '${raw}'`);
      return { logLevel: raw ?? 'info' };
    },
  },
  intSetting('ACCESS_TOKEN_TTL', 'accessTokenTtl', 300, 60, 86400, 'Lifetime in seconds of access tokens (60-86400)'),
  intSetting('ID_TOKEN_TTL', 'idTokenTtl', 3600, 60, 86400, 'Lifetime in seconds of ID tokens (60-86400)'),
  intSetting(
    'PAGINATION_TOKEN_TTL',
    'paginationTokenTtl',
    300,
    1,
    3600,
    "Lifetime in seconds of the passkey list 'offset' continuation token (1-3600)",
  ),
  intSetting(
    'DEVICE_CODE_TTL',
    'deviceCodeTtl',
    600,
    1,
    3600,
    'Lifetime in seconds of a device sign-in: how long its user code can be entered and its device code polled (1-3600)',
  ),
  intSetting(
    'KEY_REFRESH_INTERVAL',
    'keyRefreshInterval',
    60,
    1,
    3600,
    'Seconds between checks for signing keys rotated by another instance or the CLI (1-3600)',
  ),
  intSetting(
    'KEY_ROTATION_DAYS',
    'keyRotationDays',
    90,
    0,
    3650,
    'Age in days at which the signing keys are rotated by the service itself: the new keys are published two days before they sign, the old ones stay published until the tokens they signed have expired. The signing key of the SAML identity provider follows the same schedule, in the metadata a week before it signs (docs/saml.md, Key rollover). 0: only `keys rotate` and `saml keys rotate` rotate (0-3650)',
  ),
  intSetting(
    'MEMORY_RELEASE_IDLE',
    'memoryReleaseIdle',
    1,
    0,
    3600,
    'Seconds without a request after which the service gives memory back to the system: one full garbage collection (some tens of milliseconds) a tenth of a second after start-up, and after each busy period that grew the process by 16 MB or more (0-3600; 0 turns it off)',
  ),
  {
    name: 'WORKERS',
    default: '1',
    meaning:
      'Processes serving on the one port (node:cluster), a number from 1 to 64 or auto (one per available core). Each process has its own caches, kept current by cache invalidation; a process that dies is replaced. 1 (the default) runs a single process, see docs/operations.md for when more help',
    parse: workers,
  },
  {
    name: 'TRUST_PROXY',
    default: 'false',
    meaning:
      'Which X-Forwarded-For hops to trust for the client IP (rate limits, logs, METRICS_ALLOW): false (none), a hop count such as 1 (one load balancer in front), or a comma-separated list of proxy addresses/CIDR ranges such as 10.0.0.0/8. `true` is refused: it would let any client choose its own IP',
    parse: (raw) => ({ trustProxy: trustProxy(raw) }),
  },
  {
    name: 'CLAIMS_NAMESPACE',
    default: '<PUBLIC_URL>/claims',
    meaning:
      'https URL prefix of the namespaced OIDC claims ({claims_ns}/userid_sec, ...); http only when PUBLIC_URL is http on localhost',
    parse: claimsNamespace,
  },
  {
    name: 'IDP_NAMESPACE',
    default: 'idp',
    meaning: "Namespace of the directory's own ids in userid_sec (idp:<eppn>)",
    parse: idpNamespace,
  },
  {
    name: 'SUNSET_DATE',
    default: '(unset)',
    meaning: 'Date (YYYY-MM-DD) when the deprecated endpoints stop; sent as the Sunset header when set',
    parse: sunsetDate,
  },
  intSetting(
    'USERINFO_CACHE_TTL',
    'userinfoCacheTtl',
    60,
    0,
    300,
    'Seconds (0-300) /openid/userinfo keeps the claims it computed for an access token at most: a change to the token, its grant, the user, their organization or the client drops them at once on the instance that made it and within a fraction of a second on the others (cache invalidation, see docs/architecture.md), so this bound is only a safety net. 0 disables',
  ),
  intSetting(
    'AUDIT_RETENTION_DAYS',
    'auditRetentionDays',
    400,
    1,
    36_500,
    'Days (1-36500) audit records are kept; a job on every instance deletes older ones. Export them first (`audit export`) if they must be kept longer elsewhere',
  ),
  intSetting(
    'EVENTS_RETRY_BASE_MS',
    'eventsRetryBaseMs',
    4000,
    10,
    600_000,
    'Milliseconds (10-600000) a failed webhook or Shared Signals push waits before its second attempt; each later wait is three times the one before (with up to 10% jitter off it), at most an hour. The default gives attempts about 0, 4, 16 and 52 s after the change, then 2.6 min, 7.8 min, ...',
  ),
  intSetting(
    'EVENTS_DEAD_LETTER_SECONDS',
    'eventsDeadLetterSeconds',
    259_200,
    1,
    2_592_000,
    'Seconds (1-2592000) after its event a delivery that still fails is given up (state dead, kept for `events list` and `events replay`); default 3 days',
  ),
  {
    name: 'EVENTS_ALLOW_PRIVATE_TARGETS',
    default: 'false',
    meaning:
      "true lets webhooks and Shared Signals push streams reach private, loopback and link-local addresses (receivers inside the operator's network). Off, such targets are refused when registered and when a name resolves to one at delivery; loopback receivers are always allowed while PUBLIC_URL is itself on localhost",
    parse: (raw) => ({ eventsAllowPrivateTargets: flag('EVENTS_ALLOW_PRIVATE_TARGETS', raw) }),
  },
  {
    name: 'SMTP_URL',
    default: '(unset)',
    meaning:
      'The SMTP server e-mail leaves through: `smtp://user:password@host:587` (STARTTLS when the server offers it) or `smtps://user:password@host:465` (TLS from the start); user and password percent-encoded. Unset: no mail is sent, and the features that send it (invitations, security notifications, self-service recovery) say so (docs/email.md)',
    parse: smtpUrl,
  },
  {
    name: 'SMTP_FROM',
    default: '(unset)',
    meaning: 'The From of every message: `idp@example.org` or `Example IdP <idp@example.org>`; required with SMTP_URL',
    parse: smtpFrom,
  },
  intSetting(
    'SAML_FEDERATION_MAX_MB',
    'samlFederationMaxMb',
    200,
    1,
    2048,
    "The largest SAML federation metadata aggregate fetched and parsed, in megabytes (1-2048); eduGAIN's is 50-100 MB. A larger one is refused as it arrives",
  ),
  {
    name: 'WEBAUTHN_RELATED_ORIGINS',
    default: '',
    meaning:
      "Comma-separated https origins on other domains that may use passkeys of this service's RP ID (WebAuthn related origin requests); served at /.well-known/webauthn and accepted in ceremonies",
    parse: (raw) => ({ webauthnRelatedOrigins: originList('WEBAUTHN_RELATED_ORIGINS', raw) }),
  },
  {
    name: 'WEBAUTHN_REGISTRATION_HINTS',
    default: '',
    meaning:
      'Comma-separated WebAuthn hints for registration, most preferred first: security-key, client-device, hybrid (empty: the browser chooses)',
    parse: (raw) => ({
      webauthnHints: { registration: hintList('WEBAUTHN_REGISTRATION_HINTS', raw), authentication: [] },
    }),
  },
  {
    name: 'WEBAUTHN_AUTHENTICATION_HINTS',
    default: '',
    meaning: 'Comma-separated WebAuthn hints for sign-in, as for registration',
    parse: (raw, partial) => ({
      webauthnHints: {
        registration: partial.webauthnHints?.registration ?? [],
        authentication: hintList('WEBAUTHN_AUTHENTICATION_HINTS', raw),
      },
    }),
  },
  {
    name: 'AAGUID_DATA_FILE',
    default: '(unset)',
    meaning:
      "Path to a JSON file in the passkey-authenticator-aaguids format (combined_aaguid.json: AAGUID -> name, icon_light, icon_dark), read at start-up; its names and icons go over the shipped list's names on the account page, in passkey labels and in `passkey list --details`",
    parse: (raw) => {
      if (raw === undefined) return { aaguidData: undefined };
      try {
        return { aaguidData: readAaguidData(raw) };
      } catch (err) {
        throw new ConfigError('AAGUID_DATA_FILE', `${raw} ${err instanceof Error ? err.message : 'cannot be read'}`);
      }
    },
  },
  intSetting(
    'PASSKEY_UPGRADE_SNOOZE_SECONDS',
    'passkeyUpgradeSnoozeSeconds',
    30 * 86400,
    0,
    31_536_000,
    'Seconds a "Not now" on the passkey offered after a password sign-in is remembered in that browser (an organization turns the offer off with `org policy --passkey-upgrade off`)',
  ),
  intSetting(
    'UPSTREAM_TIMEOUT_MS',
    'upstreamTimeoutMs',
    10_000,
    500,
    120_000,
    "Milliseconds an upstream identity provider may take to answer one request (discovery, keys, token, userinfo; docs/upstream.md): a slower one ends the sign-in on the organization's error page",
  ),
  {
    name: 'CONSOLE_REQUIRE_PASSKEY',
    default: 'true',
    meaning:
      'true: staff sign in to the console (/console) with a passkey, a password is not enough (the console asks for the phishing-resistant class `phr`). false also accepts a password',
    parse: (raw) => ({ consoleRequirePasskey: raw === undefined ? true : flag('CONSOLE_REQUIRE_PASSKEY', raw) }),
  },
  intSetting(
    'CONSOLE_IDLE_TIMEOUT_SECONDS',
    'consoleIdleTimeoutSeconds',
    900,
    60,
    86_400,
    'Seconds without a request after which a console session ends and staff sign in again (60-86400); a console sign-in also needs a sign-in to the service no older than this',
  ),
  intSetting(
    'CHECKUSER_RATE_LIMIT',
    'checkuserRateLimit',
    600,
    1,
    1_000_000,
    'User-existence lookups allowed per client per minute',
  ),
  intSetting(
    'LOGIN_RATE_LIMIT_ACCOUNT',
    'loginRateLimitAccount',
    10,
    1,
    10_000,
    'Failed sign-ins allowed per account per 15 minutes',
  ),
  intSetting(
    'LOGIN_RATE_LIMIT_IP',
    'loginRateLimitIp',
    100,
    1,
    1_000_000,
    'Sign-in attempts allowed per client IP per 15 minutes',
  ),
  intSetting(
    'PASSWORD_HASH_CONCURRENCY',
    'passwordHashConcurrency',
    2,
    1,
    64,
    "Password hashes (argon2id, 19 MiB each) computed at once per process, on libuv's thread pool. Keep it below the pool's size (UV_THREADPOOL_SIZE, 4 by default): the other threads then stay free for token signing, which never waits behind a hash (docs/sign-in.md, Password hashing)",
  ),
  intSetting(
    'PASSWORD_HASH_QUEUE',
    'passwordHashQueue',
    32,
    0,
    100_000,
    'Password checks that may wait per process for one of those places. A sign-in beyond them is refused at once with 503 and `Retry-After: 1` (the page asks to try again in a moment) instead of waiting in a growing line',
  ),
  intSetting(
    'LDAP_PASSWORD_CHECK_CONCURRENCY',
    'ldapPasswordCheckConcurrency',
    8,
    1,
    1_000,
    "Sign-ins checked against one LDAP directory's password at once per process (docs/ldap.md, Signing in with the directory's password): each holds two connections to the directory for up to 5 seconds",
  ),
  intSetting(
    'LDAP_PASSWORD_CHECK_QUEUE',
    'ldapPasswordCheckQueue',
    16,
    0,
    100_000,
    'Directory password checks that may wait per directory and process for one of those places, 2 seconds at most. A sign-in beyond them, or one that waited that long, is refused with 503 and `Retry-After: 1`; the attempt is not counted against the rate limits',
  ),
  {
    name: 'METRICS_TOKEN',
    default: '(unset)',
    meaning:
      'When set (at least 32 characters: letters, digits, - . _ ~ + /, = padding), every /metrics scrape must send `Authorization: Bearer <token>`, from loopback too (401 otherwise)',
    parse: metricsToken,
  },
  {
    name: 'METRICS_ALLOW',
    default: DEFAULT_METRICS_ALLOW.join(','),
    meaning:
      'Comma-separated addresses/CIDR ranges /metrics answers (403 for others); the client address honours TRUST_PROXY. `0.0.0.0/0,::/0` allows every address',
    parse: (raw) => ({ metricsAllow: raw === undefined ? DEFAULT_METRICS_ALLOW : rangeList('METRICS_ALLOW', raw) }),
  },
  {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    default: '(unset)',
    meaning:
      'OpenTelemetry traces: the OTLP/HTTP (JSON) collector base URL, such as http://collector:4318 (spans go to `/v1/traces` under it). Unset: no traces, and no OpenTelemetry code is loaded. The SDK reads the other standard variables itself (OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*); docs/operations.md, Traces',
    parse: tracesEndpoint,
  },
  {
    name: 'TRACES_CLIENT_ADDRESS',
    default: 'false',
    meaning:
      "true puts the client's IP address (`client.address`) on request spans. Off, spans carry no client address: an IP address is personal data, and a trace exporter sends it outside the service. Exception messages never leave in a span either, only the exception's type (docs/operations.md, Traces)",
    parse: (raw) => ({ tracesClientAddress: flag('TRACES_CLIENT_ADDRESS', raw) }),
  },
  brandSetting(
    'BRAND_NAME',
    'name',
    'Product name shown at the top of the sign-in, consent, account and error pages and in their titles (at most 60 characters). Unset: no name is shown. Organizations can set their own (`org brand`, docs/branding.md)',
    brandName,
  ),
  brandSetting(
    'BRAND_COLOR',
    'color',
    'Accent colour of links and buttons on the light scheme, #rgb or #rrggbb; refused unless it has a contrast of at least 4.5:1 against the light page (#f4f4f6). Button labels are white or black, whichever reads better',
    (raw) => brandColor(raw, 'light'),
  ),
  brandSetting(
    'BRAND_COLOR_DARK',
    'colorDark',
    'Accent colour on the dark scheme (browsers set to dark mode), #rgb or #rrggbb, at least 4.5:1 against the dark card (#1e1e23)',
    (raw) => brandColor(raw, 'dark'),
  ),
  brandSetting(
    'BRAND_LOGO_FILE',
    'logo',
    'Path to a PNG, WebP or SVG logo (at most 100 KiB), read at start-up and shown beside BRAND_NAME',
    readLogoFile,
  ),
  brandSetting(
    'BRAND_SUPPORT_URL',
    'supportUrl',
    "Where users get help (https or mailto; http only on localhost), linked in the pages' footer",
    (raw) => brandUrl(raw, 'the support URL'),
  ),
  brandSetting(
    'BRAND_PRIVACY_URL',
    'privacyUrl',
    "The privacy policy (https; http only on localhost), linked in the pages' footer",
    (raw) => brandUrl(raw, 'the privacy policy URL'),
  ),
  brandSetting(
    'BRAND_FOOTER',
    'footer',
    "Plain text shown in the pages' footer, such as the operating organization (at most 200 characters)",
    brandFooter,
  ),
  samlSetting(
    'SAML_ORGANIZATION_NAME',
    'organizationName',
    "The organization named in the SAML identity provider's metadata (`md:Organization`, with SAML_ORGANIZATION_URL; docs/saml.md)",
    samlOrganizationName,
  ),
  samlSetting(
    'SAML_ORGANIZATION_URL',
    'organizationUrl',
    "The https address of that organization's web site, in the SAML metadata with SAML_ORGANIZATION_NAME",
    samlUrl,
  ),
  samlSetting(
    'SAML_CONTACT_TECHNICAL',
    'technicalContact',
    'E-mail address of the technical contact in the SAML metadata (`md:ContactPerson`), as federations require',
    samlContact('SAML_CONTACT_TECHNICAL'),
  ),
  samlSetting(
    'SAML_CONTACT_SUPPORT',
    'supportContact',
    'E-mail address of the support contact in the SAML metadata',
    samlContact('SAML_CONTACT_SUPPORT'),
  ),
];

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config: Partial<Config> = {};
  for (const setting of SETTINGS) {
    const raw = env[setting.name];
    Object.assign(config, setting.parse(raw === '' ? undefined : raw, config));
  }
  return config as Config;
}

/** README's configuration table, generated from SETTINGS. */
export function settingsTable(): string {
  const rows = SETTINGS.map((s) => `| \`${s.name}\` | \`${s.default}\` | ${s.meaning} |`);
  return ['| Variable | Default | Meaning |', '| --- | --- | --- |', ...rows].join('\n');
}

const KERNEL_FILE_SYSTEMS = ['/proc', '/sys', '/dev'];

function underKernelFs(path: string): string | undefined {
  return KERNEL_FILE_SYSTEMS.find((root) => path === root || path.startsWith(`${root}/`));
}

function describe(dir: StorageDirectory): { variable: string; what: string } {
  const what = dir.variable === 'DATABASE_URL' ? `the directory '${dir.path}' of the SQLite file` : `'${dir.path}'`;
  return { variable: dir.variable ?? 'DATA_DIR', what };
}

function createDefault(absolute: string, fail: (problem: string) => never): true {
  try {
    mkdirSync(absolute, { recursive: true, mode: 0o700 });
    return true;
  } catch (err) {
    return fail(
      `(the default) could not be created (${(err as NodeJS.ErrnoException).code}); run from a writable directory or set DATA_DIR`,
    );
  }
}

/**
 * Checks one storage directory: an existing, writable directory outside the kernel file systems.
 * Only the default directory is created when missing; returns true when it was.
 */
function checkDirectory(dir: StorageDirectory): boolean {
  const { variable, what } = describe(dir);
  const fail = (problem: string): never => {
    throw new ConfigError(variable, `${what} ${problem}`);
  };
  const absolute = resolve(dir.path);
  const kernel = underKernelFs(absolute);
  if (kernel)
    fail(
      `is under ${kernel}, a kernel file system that cannot keep files; choose a directory on disk, such as /var/lib/idp`,
    );
  let stat: Stats | undefined;
  try {
    stat = statSync(absolute);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && dir.variable === undefined) return createDefault(absolute, fail);
    if (code === 'ENOENT') fail(`does not exist; create it (mkdir -p ${absolute}) or correct ${variable}`);
    if (code === 'ENOTDIR') fail(`is not a directory: a part of the path is a file; correct ${variable}`);
    fail(`cannot be examined (${code ?? 'unknown error'}); check its permissions or correct ${variable}`);
  }
  const real = realpathSync(absolute);
  const realKernel = underKernelFs(real);
  if (realKernel)
    fail(
      `leads to ${real}, under ${realKernel}, a kernel file system that cannot keep files; choose a directory on disk`,
    );
  if (!stat!.isDirectory()) fail(`is a file, not a directory; point ${variable} at a directory`);
  try {
    accessSync(absolute, constants.W_OK | constants.X_OK);
  } catch {
    fail(
      `is not writable by this process (uid ${process.getuid?.() ?? '?'}); make it writable (chown/chmod) or choose another directory`,
    );
  }
  return false;
}

/**
 * Verifies the directories the service will write to before anything is opened, so a bad path is
 * reported as the setting that named it. Returns the default directories it created.
 */
export function checkStorage(config: Config): string[] {
  const created: string[] = [];
  const seen = new Set<string>();
  for (const dir of config.storage) {
    if (dir.holds === 'secret' && config.idpSecret !== undefined) continue;
    const key = resolve(dir.path);
    if (seen.has(key)) continue;
    seen.add(key);
    if (checkDirectory(dir)) created.push(dir.path);
  }
  return created;
}

/** The store's bounds on PostgreSQL connections and statements (DATABASE_*_TIMEOUT_MS). */
export function databaseTimeouts(config: Pick<Config, 'databaseConnectTimeoutMs' | 'databaseStatementTimeoutMs'>) {
  return { connectMs: config.databaseConnectTimeoutMs, statementMs: config.databaseStatementTimeoutMs };
}
