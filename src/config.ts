// The one typed configuration of the service, read from the environment.
// Every setting is listed in SETTINGS with its default and meaning; README's table mirrors it.
import { dirname } from 'node:path';
import { RESERVED_NAMESPACES } from './directory/namespaces.ts';

export interface Config {
  port: number;
  host: string;
  publicUrl: string; // origin only, no trailing slash: the issuer and base of every absolute URL
  databaseUrl: string; // a SQLite file path, ':memory:', or postgres://...
  dialect: 'sqlite' | 'postgres';
  idpSecret: string | undefined; // resolved to a value by loadSecret() before use
  dataDir: string;
  logLevel: string;
  accessTokenTtl: number; // seconds
  idTokenTtl: number; // seconds
  paginationTokenTtl: number; // seconds
  keyRefreshInterval: number; // seconds between checks for rotated signing keys
  /** Fastify trustProxy: false, a hop count, or trusted proxy addresses/CIDR ranges */
  trustProxy: false | number | string;
  claimsNamespace: string;
  idpNamespace: string; // namespace of userid_sec for the directory's own eppn ids
  sunsetDate: string | undefined; // HTTP-date for Sunset on deprecated endpoints
  userinfoCacheTtl: number; // seconds userinfo claims are reused per access token (0: never)
  checkuserRateLimit: number; // lookups per client per minute
  loginRateLimitAccount: number; // failed logins per account per 15 minutes
  loginRateLimitIp: number; // login attempts per client IP per 15 minutes
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
  default: string;
  meaning: string;
}

export const SETTINGS: Setting[] = [
  { name: 'PORT', default: '8080', meaning: 'TCP port to listen on' },
  { name: 'HOST', default: '127.0.0.1', meaning: 'Address to bind; use 0.0.0.0 (or ::) in a container or behind a load balancer' },
  { name: 'PUBLIC_URL', default: 'http://localhost:<PORT>', meaning: 'External origin (scheme://host[:port], no path) as clients see it. It is the OIDC issuer and the base of every absolute URL the service emits (discovery, Link headers, photo URLs), whatever Host header a proxy forwards' },
  { name: 'DATABASE_URL', default: './data/idp.sqlite', meaning: 'A SQLite file path (embedded default) or a postgres:// URL shared by several instances' },
  { name: 'IDP_SECRET', default: '(generated for SQLite)', meaning: 'Master secret, at least 32 characters. Signing keys are encrypted under it; pagination cursors, cookies and client-secret hashes are keyed from it. With SQLite and none given, `npm start` generates one on first start into <DATA_DIR>/idp-secret (mode 0600); admin commands never generate one. Required with PostgreSQL, and must be the same on every instance' },
  { name: 'DATA_DIR', default: './data, or the directory of DATABASE_URL when that is a SQLite file', meaning: 'Directory for the default SQLite file and the generated secret' },
  { name: 'LOG_LEVEL', default: 'info', meaning: 'fatal, error, warn, info, debug, trace or silent' },
  { name: 'ACCESS_TOKEN_TTL', default: '300', meaning: 'Lifetime in seconds of access tokens (60-86400)' },
  { name: 'ID_TOKEN_TTL', default: '3600', meaning: 'Lifetime in seconds of ID tokens (60-86400)' },
  { name: 'PAGINATION_TOKEN_TTL', default: '300', meaning: "Lifetime in seconds of the passkey list 'offset' continuation token (1-3600)" },
  { name: 'KEY_REFRESH_INTERVAL', default: '60', meaning: 'Seconds between checks for signing keys rotated by another instance or the CLI (1-3600)' },
  { name: 'TRUST_PROXY', default: 'false', meaning: 'Which X-Forwarded-For hops to trust for the client IP (rate limits, logs): false (none), a hop count such as 1 (one load balancer in front), or a comma-separated list of proxy addresses/CIDR ranges such as 10.0.0.0/8. `true` is refused: it would let any client choose its own IP' },
  { name: 'CLAIMS_NAMESPACE', default: '<PUBLIC_URL>/claims', meaning: 'https URL prefix of the namespaced OIDC claims ({claims_ns}/userid_sec, ...)' },
  { name: 'IDP_NAMESPACE', default: 'idp', meaning: 'Namespace of the directory\'s own ids in userid_sec (idp:<eppn>)' },
  { name: 'SUNSET_DATE', default: '(unset)', meaning: 'Date (YYYY-MM-DD) when the deprecated endpoints stop; sent as the Sunset header when set' },
  { name: 'USERINFO_CACHE_TTL', default: '5', meaning: 'Seconds (0-300) /openid/userinfo reuses the claims it computed for an access token; the token itself is checked against the database on every call, so revocation is immediate, while group and profile changes show within this time. 0 disables' },
  { name: 'CHECKUSER_RATE_LIMIT', default: '600', meaning: 'User-existence lookups allowed per client per minute' },
  { name: 'LOGIN_RATE_LIMIT_ACCOUNT', default: '10', meaning: 'Failed sign-ins allowed per account per 15 minutes' },
  { name: 'LOGIN_RATE_LIMIT_IP', default: '100', meaning: 'Sign-in attempts allowed per client IP per 15 minutes' },
];

const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

function intSetting(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got '${raw}'`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

const IPV4_CIDR = /^(\d{1,3}\.){3}\d{1,3}(\/\d{1,2})?$/;
const IPV6_CIDR = /^[0-9a-f:.]+(\/\d{1,3})?$/i;

function trustProxySetting(raw: string | undefined): Config['trustProxy'] {
  if (raw === undefined || raw === '' || /^(0|false|no|off)$/i.test(raw)) return false;
  if (/^(true|yes|on)$/i.test(raw)) {
    throw new ConfigError('TRUST_PROXY', 'true would trust every X-Forwarded-For hop (clients could choose their IP); give the number of proxies in front, e.g. 1, or their addresses/CIDR ranges');
  }
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops < 1 || hops > 10) throw new ConfigError('TRUST_PROXY', `hop count must be between 1 and 10, got ${hops}`);
    return hops;
  }
  const entries = raw.split(',').map((e) => e.trim());
  for (const e of entries) {
    if (!IPV4_CIDR.test(e) && !(e.includes(':') && IPV6_CIDR.test(e))) {
      throw new ConfigError('TRUST_PROXY', `'${e}' is not an IP address or CIDR range`);
    }
  }
  return entries.join(',');
}

function originSetting(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be an absolute http(s) URL, got '${raw}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(name, `must use http or https, got '${url.protocol}'`);
  if (url.pathname !== '/' || url.search || url.hash || url.username || url.password) {
    throw new ConfigError(name, `must be an origin only (scheme://host[:port]), without path, query or credentials, got '${raw}'`);
  }
  return url.origin;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = intSetting(env, 'PORT', 8080, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const publicUrl = originSetting('PUBLIC_URL', env.PUBLIC_URL || `http://localhost:${port}`);
  const databaseUrl = env.DATABASE_URL || `${(env.DATA_DIR || './data').replace(/\/$/, '')}/idp.sqlite`;
  // The generated secret lives beside the SQLite file it protects unless DATA_DIR says otherwise.
  const isSqliteFile = !/^[a-z][a-z0-9+.-]*:\/\//i.test(databaseUrl) && databaseUrl !== ':memory:';
  const dataDir = env.DATA_DIR || (isSqliteFile ? dirname(databaseUrl) : './data');
  let dialect: Config['dialect'] = 'sqlite';
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    dialect = 'postgres';
    try {
      new URL(databaseUrl);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
  } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must be a SQLite file path or a postgres:// URL');
  }

  const idpSecret = env.IDP_SECRET || undefined;
  if (idpSecret !== undefined && idpSecret.length < 32) {
    throw new ConfigError('IDP_SECRET', `must be at least 32 characters, got ${idpSecret.length}`);
  }
  if (dialect === 'postgres' && idpSecret === undefined) {
    throw new ConfigError('IDP_SECRET', 'is required with PostgreSQL (every instance must share the same secret)');
  }

  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.has(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${[...LOG_LEVELS].join(', ')}, got '${logLevel}'`);

  const claimsNamespace = (env.CLAIMS_NAMESPACE || `${publicUrl}/claims`).replace(/\/$/, '');
  let claimsUrl: URL;
  try {
    claimsUrl = new URL(claimsNamespace);
  } catch {
    throw new ConfigError('CLAIMS_NAMESPACE', `must be an absolute URL prefix, got '${claimsNamespace}'`);
  }
  // https, as claim names published to relying parties; http only for a service itself on http (development)
  if (claimsUrl.protocol !== 'https:' && !(claimsUrl.protocol === 'http:' && publicUrl.startsWith('http:'))) {
    throw new ConfigError('CLAIMS_NAMESPACE', `must be an https URL prefix, got '${claimsNamespace}'`);
  }

  const idpNamespace = env.IDP_NAMESPACE || 'idp';
  if (!/^[a-z][a-z0-9_-]{0,31}$/.test(idpNamespace)) {
    throw new ConfigError('IDP_NAMESPACE', `must be lowercase letters, digits, '-' or '_' starting with a letter, got '${idpNamespace}'`);
  }
  if (RESERVED_NAMESPACES.includes(idpNamespace)) {
    throw new ConfigError('IDP_NAMESPACE', `'${idpNamespace}' already names another kind of user id`);
  }

  let sunsetDate: string | undefined;
  if (env.SUNSET_DATE) {
    const d = /^\d{4}-\d{2}-\d{2}$/.test(env.SUNSET_DATE) ? new Date(`${env.SUNSET_DATE}T00:00:00Z`) : new Date(NaN);
    if (Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== env.SUNSET_DATE) {
      throw new ConfigError('SUNSET_DATE', `must be a calendar date YYYY-MM-DD, got '${env.SUNSET_DATE}'`);
    }
    sunsetDate = d.toUTCString();
  }

  return {
    port,
    host,
    publicUrl,
    databaseUrl,
    dialect,
    idpSecret,
    dataDir,
    logLevel,
    accessTokenTtl: intSetting(env, 'ACCESS_TOKEN_TTL', 300, 60, 86400),
    idTokenTtl: intSetting(env, 'ID_TOKEN_TTL', 3600, 60, 86400),
    paginationTokenTtl: intSetting(env, 'PAGINATION_TOKEN_TTL', 300, 1, 3600),
    keyRefreshInterval: intSetting(env, 'KEY_REFRESH_INTERVAL', 60, 1, 3600),
    trustProxy: trustProxySetting(env.TRUST_PROXY),
    claimsNamespace,
    idpNamespace,
    sunsetDate,
    userinfoCacheTtl: intSetting(env, 'USERINFO_CACHE_TTL', 5, 0, 300),
    checkuserRateLimit: intSetting(env, 'CHECKUSER_RATE_LIMIT', 600, 1, 1_000_000),
    loginRateLimitAccount: intSetting(env, 'LOGIN_RATE_LIMIT_ACCOUNT', 10, 1, 10_000),
    loginRateLimitIp: intSetting(env, 'LOGIN_RATE_LIMIT_IP', 100, 1, 1_000_000),
  };
}
