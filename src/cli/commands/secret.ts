// `secret rotate`: replaces the master secret. Every value sealed under it (signing and SAML keys,
// webhook secrets, push streams' Authorization headers, LDAP bind passwords, upstream identity
// providers' client secrets and private keys, queued recovery links)
// is opened and sealed again under the new secret in one transaction; the keys whose results are
// kept (client-secret hashes, SAML pairwise ids) are kept, sealed under the new secret
// (src/crypto.ts, KEPT_KEYS). `secret reseal` seals again what an instance still on the old secret
// wrote during the transition (docs/operations.md, Replacing the master secret).
import { randomBytes } from 'node:crypto';
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Transaction } from 'kysely';
import { recordAudit } from '../../audit/index.ts';
import {
  KEPT_KEYS,
  keptKeyAad,
  keptKeyValues,
  keyring,
  open,
  PREVIOUS_SECRET_FILE,
  seal,
  SECRET_FILE,
  type KeptKeyName,
  type Keyring,
} from '../../crypto.ts';
import { bindPasswordAad } from '../../directory/ldap-directories.ts';
import { badRequest } from '../../errors.ts';
import { streamAuthorizationAad } from '../../events/delivery.ts';
import { webhookSecretAad } from '../../events/webhooks.ts';
import { signingKeyAad } from '../../oauth/keys.ts';
import { samlKeyAad } from '../../service-providers/saml-keys.ts';
import type { Store } from '../../store/index.ts';
import {
  inResealTransaction,
  insertKeptKey,
  listKeptKeys,
  listMailWithLinks,
  listSealedValues,
  updateEventData,
  updateSealedValue,
  type SealedPlace,
} from '../../store/kept-keys.ts';
import type { DB } from '../../store/schema.ts';
import { keyAad as upstreamKeyAad, secretAad as upstreamSecretAad } from '../../upstream/providers.ts';
import { openLink, sealLink, type LinkMailData } from '../../webauthn/mail-links.ts';
import { type CommandDef, type Ctx } from '../command.ts';

/** The key and additional data each sealed column is sealed with. */
function sealing(keys: Keyring, place: SealedPlace): { key: Buffer; aad: string } {
  switch (place.table) {
    case 'signing_keys':
      return { key: keys.keyEncryption, aad: signingKeyAad(place.id) };
    case 'saml_keys':
      return { key: keys.keyEncryption, aad: samlKeyAad(place.id) };
    case 'webhooks':
      return { key: keys.eventSecrets, aad: webhookSecretAad(place.id) };
    case 'ssf_streams':
      return { key: keys.eventSecrets, aad: streamAuthorizationAad(place.id) };
    case 'ldap_directories':
      return { key: keys.directorySecrets, aad: bindPasswordAad(place.id) };
    case 'upstream_providers':
      return {
        key: keys.upstreamSecrets,
        aad: place.column === 'oidc_client_secret' ? upstreamSecretAad(place.id) : upstreamKeyAad(place.id),
      };
    case 'kept_keys': {
      const name = (Object.keys(KEPT_KEYS) as KeptKeyName[]).find((n) => KEPT_KEYS[n] === place.id);
      return { key: keys.keyEncryption, aad: name ? keptKeyAad(name) : `kept-key:${place.id}` };
    }
  }
}

export interface ResealCounts {
  sealed_values: number;
  queued_links: number;
  kept_keys_added: number;
}

/**
 * Opens every sealed value with `from` (which also opens what its previous secret sealed) and seals
 * it under `to`, in the transaction given; the kept keys are stored when they are not yet. A value
 * that opens under neither aborts it all: the database stays as it was.
 */
async function resealAll(trx: Transaction<DB>, from: Keyring, to: Keyring, now: number): Promise<ResealCounts> {
  const counts: ResealCounts = { sealed_values: 0, queued_links: 0, kept_keys_added: 0 };
  for (const value of await listSealedValues(trx)) {
    const before = sealing(from, value);
    const plain = open(before.key, value.value, before.aad);
    if (!plain)
      throw badRequest(
        `${value.table} ${value.id} (${value.column}) does not open under the current secret: nothing was changed`,
      );
    const after = sealing(to, value);
    await updateSealedValue(trx, value, seal(after.key, plain, after.aad));
    counts.sealed_values++;
  }
  for (const mail of await listMailWithLinks(trx)) {
    const data = JSON.parse(mail.data) as LinkMailData;
    if (typeof data.link !== 'string') continue;
    const token = openLink(from, data);
    // A link that no longer opens cannot be sent anyway; it is left as it is.
    if (token === undefined) continue;
    await updateEventData(
      trx,
      mail.id,
      JSON.stringify({ ...data, link: sealLink(to, data.eppn, data.link_id, token) }),
    );
    counts.queued_links++;
  }
  const stored = new Set((await listKeptKeys(trx)).map((k) => k.name));
  const values = keptKeyValues(from);
  for (const name of Object.keys(KEPT_KEYS) as KeptKeyName[]) {
    if (stored.has(KEPT_KEYS[name])) continue;
    await insertKeptKey(trx, KEPT_KEYS[name], seal(to.keyEncryption, values[name], keptKeyAad(name)), now);
    counts.kept_keys_added++;
  }
  return counts;
}

/** Replaces the master secret in the database: everything sealed again under `next`, audited. */
export async function rotateMasterSecret(
  store: Store,
  current: Keyring,
  next: string,
  change: { actor: Ctx['actor']; now?: number },
): Promise<ResealCounts> {
  const now = change.now ?? Date.now();
  const to = keyring(next);
  return inResealTransaction(store, async (trx) => {
    const counts = await resealAll(trx, current, to, now);
    await recordAudit(trx, { action: 'secret.rotate', actor: change.actor, at: now, details: { ...counts } });
    return counts;
  });
}

/** Seals again under the current secret what is still sealed under the previous one; audited. */
export async function resealUnderCurrent(
  store: Store,
  keys: Keyring,
  change: { actor: Ctx['actor']; now?: number },
): Promise<ResealCounts> {
  const now = change.now ?? Date.now();
  return inResealTransaction(store, async (trx) => {
    const counts = await resealAll(trx, keys, keys, now);
    await recordAudit(trx, { action: 'secret.reseal', actor: change.actor, at: now, details: { ...counts } });
    return counts;
  });
}

async function newSecret(ctx: Ctx, fromStdin: boolean, current: string): Promise<string> {
  if (!fromStdin) return randomBytes(32).toString('base64url');
  const secret = (await ctx.io.readStdin()).trim();
  if (secret.length < 32) throw badRequest(`the new secret must be at least 32 characters, got ${secret.length}`);
  if (/\s/.test(secret)) throw badRequest('the new secret must be one line without spaces');
  if (secret === current) throw badRequest('the new secret is the current one');
  return secret;
}

function writeSecretFile(path: string, secret: string): void {
  try {
    writeFileSync(path, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw badRequest(`${path} exists already: move it away (or give --out) and run again`);
    throw badRequest(`cannot write the new secret to ${path} (${code ?? 'error'})`);
  }
}

export const secretCommands: CommandDef[] = [
  {
    group: 'secret',
    name: 'rotate',
    summary:
      'replace the master secret: every sealed value sealed again under a new one (generated, or read from standard input with --stdin), in one transaction',
    options: {
      stdin: { type: 'boolean', description: 'read the new secret from standard input instead of generating one' },
      out: {
        type: 'string',
        value: '<file>',
        description:
          'where to write the new secret (mode 0600; must not exist); default: <DATA_DIR>/idp-secret when the secret is kept there, else <DATA_DIR>/idp-secret.new',
      },
    },
    async run(ctx, values) {
      const source = ctx.secret;
      if (!source) throw badRequest('the master secret is not known to this command');
      const next = await newSecret(ctx, values.stdin === true, source.secret);
      // The service's own secret file is replaced only once the database is sealed under the new
      // secret; until then the new one waits beside it, so no failure can lose it.
      const inDataDir = source.path !== undefined && values.out === undefined;
      const target = resolve(
        typeof values.out === 'string'
          ? values.out
          : join(ctx.config.dataDir, inDataDir ? SECRET_FILE : 'idp-secret.new'),
      );
      const staged = inDataDir ? `${target}.next` : target;
      writeSecretFile(staged, next);
      let counts: ResealCounts;
      try {
        counts = await rotateMasterSecret(ctx.store, ctx.keys, next, { actor: ctx.actor });
      } catch (err) {
        rmSync(staged, { force: true });
        throw err;
      }
      const previousPath = join(ctx.config.dataDir, PREVIOUS_SECRET_FILE);
      if (inDataDir) {
        writeFileSync(previousPath, `${source.secret}\n`, { mode: 0o600 });
        renameSync(staged, target);
      }
      const view = {
        secret_file: target,
        previous_secret_file: inDataDir ? resolve(previousPath) : null,
        ...counts,
      };
      if (ctx.json) return view;
      return [
        `Every sealed value is now sealed under the new master secret (${counts.sealed_values} values, ${counts.queued_links} queued links).`,
        `The new secret is in ${target}.`,
        inDataDir
          ? `The old one is in ${resolve(previousPath)}: restart the service now; remove that file once 'secret reseal' has run after the transition.`
          : 'On every instance, one at a time: set IDP_SECRET to the new secret and IDP_SECRET_PREVIOUS to the old one, and restart it. Then run `secret reseal`, remove IDP_SECRET_PREVIOUS and restart them again (docs/operations.md).',
        'Keep the new secret with the backups taken from now on, apart from them; older backups need the old one.',
      ].join('\n');
    },
  },
  {
    group: 'secret',
    name: 'reseal',
    summary:
      'seal again under the current master secret what is still sealed under the previous one (IDP_SECRET_PREVIOUS), after every instance runs on the new one',
    options: {},
    async run(ctx) {
      if (!ctx.secret?.previous)
        throw badRequest('no previous secret is set (IDP_SECRET_PREVIOUS or <DATA_DIR>/idp-secret.previous)');
      const counts = await resealUnderCurrent(ctx.store, ctx.keys, { actor: ctx.actor });
      const previousFile = ctx.secret.path !== undefined ? join(ctx.config.dataDir, PREVIOUS_SECRET_FILE) : undefined;
      if (ctx.json) return counts;
      return [
        `Every sealed value is sealed under the current master secret (${counts.sealed_values} values, ${counts.queued_links} queued links).`,
        previousFile !== undefined && existsSync(previousFile)
          ? `Remove ${resolve(previousFile)} and restart the service: the old secret is then refused.`
          : 'Remove IDP_SECRET_PREVIOUS from every instance and restart them one at a time: the old secret is then refused.',
      ].join('\n');
    },
  },
];
