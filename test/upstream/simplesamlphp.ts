// A SAML identity provider that is not ours: Debian's SimpleSAMLphp (1.19), run by PHP's built-in
// web server on a free loopback port, from a temporary directory with its own configuration: the
// `exampleauth:UserPass` source with a few users carrying eduPerson attributes, a signing key made
// here, and the service provider's metadata document given to it as an XML metadata source.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../e2e/helpers.ts';
import { writeKeyPair, type KeyPair } from '../e2e/saml/keys.ts';

const SSP_ROOT = process.env.SIMPLESAMLPHP_ROOT || '/usr/share/simplesamlphp';
const PHP = process.env.PHP_CLI || '/usr/bin/php';

/** The reason to skip a test that needs SimpleSAMLphp, or false. Under CI=true a missing one is an error. */
export function simpleSamlPhpMissing(): string | false {
  const php = spawnSync(PHP, ['-r', 'echo PHP_VERSION;'], { encoding: 'utf8' });
  const ssp = spawnSync(PHP, [
    '-r',
    `exit(is_file('${SSP_ROOT}/www/saml2/idp/SSOService.php') && class_exists('DOMDocument') && function_exists('mb_strlen') ? 0 : 1);`,
  ]);
  const skip =
    php.status === 0 && ssp.status === 0
      ? false
      : 'simplesamlphp, php-cli, php-xml and php-mbstring are needed (.ci/run installs them)';
  if (skip && process.env.CI === 'true') throw new Error(skip);
  return skip;
}

export interface SspUser {
  username: string;
  password: string;
  /** attribute name (as in SimpleSAMLphp, e.g. eduPersonPrincipalName) → values; sent with urn:oid names */
  attributes: Record<string, string[]>;
}

export const DEFAULT_USERS: SspUser[] = [
  {
    username: 'ada',
    password: 'ada-pass-123',
    attributes: {
      uid: ['ada'],
      eduPersonPrincipalName: ['ada@uni.example'],
      mail: ['ada@uni.example'],
      givenName: ['Ada'],
      sn: ['Lovelace'],
      displayName: ['Ada Lovelace'],
      eduPersonAffiliation: ['member', 'staff'],
    },
  },
  {
    username: 'grace',
    password: 'grace-pass-123',
    attributes: {
      uid: ['grace'],
      eduPersonPrincipalName: ['grace@uni.example'],
      mail: ['grace@uni.example'],
      givenName: ['Grace'],
      sn: ['Hopper'],
      displayName: ['Grace Hopper'],
      eduPersonAffiliation: ['member', 'student'],
    },
  },
];

export interface SspOptions {
  /** the service provider's metadata document (our /saml2/sp/metadata) */
  spMetadata: string;
  users?: SspUser[];
  /** encrypt assertions to the SP's encryption key (default false) */
  encryptAssertions?: boolean;
  /** sign the Response too, not only the assertion (default true) */
  signResponse?: boolean;
  /** NameID format released (default persistent) */
  nameIdFormat?: 'persistent' | 'transient';
}

export interface SimpleSamlPhp {
  url: string;
  entityId: string;
  metadataUrl: string;
  signing: KeyPair;
  /** the IdP's metadata document, as it serves it */
  metadata(): Promise<string>;
  /** the SP metadata document it reads can be replaced (it is read again on every request) */
  setSpMetadata(xml: string): void;
  output(): string;
  stop(): Promise<void>;
}

const php = (value: unknown): string => {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(php).join(', ')}]`;
  return `[${Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `${php(k)} => ${php(v)}`)
    .join(', ')}]`;
};

const URI = 'urn:oasis:names:tc:SAML:2.0:attrname-format:uri';

export async function startSimpleSamlPhp(options: SspOptions): Promise<SimpleSamlPhp> {
  const dir = mkdtempSync(join(tmpdir(), 'idp-simplesamlphp-'));
  for (const sub of ['config', 'metadata', 'cert', 'tmp', 'sessions', 'log', 'data']) mkdirSync(join(dir, sub));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const entityId = `${url}/saml2/idp/metadata.php`;
  const signing = await writeKeyPair(join(dir, 'cert'), 'idp', `127.0.0.1 SimpleSAMLphp`);
  const spFile = join(dir, 'sp-metadata.xml');
  writeFileSync(spFile, options.spMetadata);
  const config = {
    baseurlpath: `${url}/`,
    certdir: `${join(dir, 'cert')}/`,
    loggingdir: `${join(dir, 'log')}/`,
    datadir: `${join(dir, 'data')}/`,
    tempdir: join(dir, 'tmp'),
    metadatadir: `${join(dir, 'metadata')}/`,
    // Debian keeps the attribute maps with the configuration (/etc/simplesamlphp, linked as config/)
    attributenamemapdir: `${SSP_ROOT}/config/attributemap/`,
    'metadata.sources': [{ type: 'flatfile' }, { type: 'xml', file: spFile }],
    technicalcontact_name: 'Tests',
    technicalcontact_email: 'tests@example.org',
    timezone: 'UTC',
    secretsalt: randomBytes(16).toString('hex'),
    'auth.adminpassword': randomBytes(16).toString('hex'),
    'admin.protectindexpage': true,
    'admin.protectmetadata': false,
    'admin.checkforupdates': false,
    'trusted.url.domains': ['127.0.0.1', `127.0.0.1:${port}`],
    'enable.saml20-idp': true,
    'enable.shib13-idp': false,
    'enable.adfs-idp': false,
    'module.enable': { exampleauth: true, core: true, saml: true, admin: true },
    'store.type': 'phpsession',
    'session.phpsession.savepath': join(dir, 'sessions'),
    'session.cookie.secure': false,
    'session.cookie.samesite': null,
    'language.cookie.secure': false,
    'language.cookie.samesite': null,
    'logging.level': 7,
    'logging.handler': 'file',
    'logging.logfile': 'simplesamlphp.log',
    'assertion.allowed_clock_skew': 180,
    showerrors: true,
    errorreporting: false,
    production: false,
  };
  writeFileSync(join(dir, 'config', 'config.php'), `<?php\n$config = ${php(config)};\n`);
  const users = options.users ?? DEFAULT_USERS;
  const source: Record<string, unknown> = { 0: 'exampleauth:UserPass' };
  for (const user of users) source[`${user.username}:${user.password}`] = user.attributes;
  const authsources = `<?php\n$config = ${php({ admin: ['core:AdminPassword'], 'example-userpass': source })};\n`;
  // php() writes a list key "0" as '0' => ..., which PHP reads as the integer 0: what authsources wants
  writeFileSync(join(dir, 'config', 'authsources.php'), authsources);
  const format =
    options.nameIdFormat === 'transient'
      ? 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient'
      : 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
  const hosted = `<?php
$metadata[${php(entityId)}] = [
  'host' => '__DEFAULT__',
  'privatekey' => 'idp.key',
  'certificate' => 'idp.crt',
  'auth' => 'example-userpass',
  'NameIDFormat' => ${php(format)},
  'attributes.NameFormat' => ${php(URI)},
  'signature.algorithm' => 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
  'saml20.sign.assertion' => true,
  'saml20.sign.response' => ${php(options.signResponse ?? true)},
  'assertion.encryption' => ${php(options.encryptAssertions ?? false)},
  'sharedkey_algorithm' => 'http://www.w3.org/2009/xmlenc11#aes256-gcm',
  'validate.authnrequest' => true,
  'authproc' => [
    10 => ['class' => 'saml:PersistentNameID', 'attribute' => 'uid', 'nameId' => true],
    20 => ['class' => 'core:AttributeMap', 'name2oid'],
  ],
];
`;
  writeFileSync(join(dir, 'metadata', 'saml20-idp-hosted.php'), hosted);
  writeFileSync(join(dir, 'metadata', 'saml20-sp-remote.php'), '<?php\n');
  writeFileSync(join(dir, 'metadata', 'saml20-idp-remote.php'), '<?php\n');
  const child: ChildProcess = spawn(PHP, ['-S', `127.0.0.1:${port}`, '-t', join(SSP_ROOT, 'www')], {
    cwd: dir,
    env: { ...process.env, SIMPLESAMLPHP_CONFIG_DIR: join(dir, 'config') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    if (!process.env.KEEP_SSP) rmSync(dir, { recursive: true, force: true });
  };
  const metadata = async () => {
    const response = await fetch(`${entityId}?output=xml`);
    const text = await response.text();
    if (!response.ok || !text.includes('IDPSSODescriptor'))
      throw new Error(`SimpleSAMLphp served no metadata (${response.status}):\n${text.slice(0, 2000)}\n${output}`);
    return text;
  };
  try {
    for (let i = 0; ; i++) {
      try {
        await metadata();
        break;
      } catch (err) {
        if (i > 100 || child.exitCode !== null) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    entityId,
    metadataUrl: entityId,
    signing,
    metadata,
    setSpMetadata: (xml) => writeFileSync(spFile, xml),
    output: () => output,
    stop,
  };
}

/** A cookie jar of one browser-less client. */
function jar() {
  const cookies = new Map<string, string>();
  return {
    header: () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
    take(response: Response) {
      for (const line of response.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const eq = pair!.indexOf('=');
        cookies.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
      }
    },
  };
}

const decodeEntities = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#039;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

function formOf(html: string): { action: string; fields: Record<string, string> } {
  const action = /<form[^>]*action="([^"]*)"/i.exec(html)?.[1];
  if (action === undefined) throw new Error(`no form in:\n${html.slice(0, 3000)}`);
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input[^>]*>/gi)) {
    const name = /name="([^"]*)"/i.exec(m[0])?.[1];
    const value = /value="([^"]*)"/i.exec(m[0])?.[1] ?? '';
    if (name) fields[decodeEntities(name)] = decodeEntities(value);
  }
  return { action: decodeEntities(action), fields };
}

/**
 * Signs in at SimpleSAMLphp without a browser: follows the AuthnRequest's URL (HTTP-Redirect) or
 * posts its form, submits the user name and password, and returns the form SimpleSAMLphp would
 * auto-post to the service provider's ACS (its action and fields, SAMLResponse among them).
 */
export async function signInAtSsp(
  start: { url: string; form?: Record<string, string> },
  user: { username: string; password: string },
): Promise<{ action: string; fields: Record<string, string> }> {
  const cookies = jar();
  const go = async (url: string, body?: Record<string, string>): Promise<Response> => {
    let response = await fetch(url, {
      method: body ? 'POST' : 'GET',
      redirect: 'manual',
      headers: {
        cookie: cookies.header(),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(body ? { body: new URLSearchParams(body).toString() } : {}),
    });
    cookies.take(response);
    for (let hops = 0; response.status >= 300 && response.status < 400 && hops < 10; hops++) {
      const next = new URL(response.headers.get('location')!, url).toString();
      response = await fetch(next, { redirect: 'manual', headers: { cookie: cookies.header() } });
      cookies.take(response);
      url = next;
    }
    return Object.assign(response, { finalUrl: url });
  };
  const first = await go(start.url, start.form);
  const loginUrl = (first as Response & { finalUrl: string }).finalUrl;
  const login = formOf(await first.text());
  const fields = { ...login.fields, username: user.username, password: user.password };
  const answered = await go(new URL(login.action || loginUrl, loginUrl).toString(), fields);
  const html = await answered.text();
  if (!html.includes('SAMLResponse'))
    throw new Error(`SimpleSAMLphp did not answer with a Response:\n${html.slice(0, 3000)}`);
  return formOf(html);
}
