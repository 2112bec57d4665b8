// The linking rules (docs/upstream.md, Linking): which account an upstream identity signs in to.
// A linked identity signs in to its account; otherwise the provider's --link-by finds one (an
// e-mail address only when the upstream says it is verified, and only in the provider's
// organization), or --create-users makes one. A link is never moved: an identity linked to one
// account, or an account linked to another identity of the same provider, is refused.
import { createHash } from 'node:crypto';
import type { Store } from '../store/index.ts';
import * as dir from '../store/directory.ts';
import * as repo from '../store/upstream.ts';
import { insertUserId, deleteUserId } from '../store/directory.ts';
import { publish } from '../store/invalidation.ts';
import { accountDisabled, addUser, eppnProblem, normalizeEppn, normalizeEmail, realmOf } from '../directory/index.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { isUniqueViolation } from '../store/index.ts';
import { rolesOfUser } from '../store/roles.ts';
import { iso } from '../time.ts';
import type { UpstreamAssertion, UpstreamProvider } from './types.ts';
import { findUpstreamProvider } from './providers.ts';
import { recordingRefusals, requireWeaker } from '../directory/roles.ts';

export type LinkRefusal =
  /** no account matched and the provider does not create users */
  | 'no_account'
  /** the account found is already linked to another identity of this provider */
  | 'account_linked_elsewhere'
  /** the identity is already linked to another account */
  | 'identity_linked_elsewhere'
  /** the account is disabled */
  | 'disabled'
  /** the linked account is not in the provider's organization */
  | 'wrong_organization';

export type LinkOutcome =
  | { ok: true; user: dir.User; how: 'linked' | 'matched' | 'created' }
  | { ok: false; reason: LinkRefusal; user?: dir.User };

/** An attribute's one value (the first of several), trimmed; undefined when empty. */
export function single(attributes: UpstreamAssertion['attributes'], name: string): string | undefined {
  const raw = attributes[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}

/** Printable ASCII only: an upstream's eppn or address is never case-folded from anything else. */
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;

/**
 * The attribute's one value when it is plain ASCII; undefined otherwise. Lower-casing other
 * characters can turn them into ASCII letters (U+212A KELVIN SIGN into k), so a value that is not
 * ASCII is never normalised, matched or made into a username.
 */
export function asciiSingle(attributes: UpstreamAssertion['attributes'], name: string): string | undefined {
  const value = single(attributes, name);
  return value !== undefined && PRINTABLE_ASCII.test(value) ? value : undefined;
}

/** Why a candidate account is not linked, beyond the refusal shown (audited as an upstream.refused record of its own). */
type CandidateRefusal = { refusal: LinkRefusal; detail: 'ambiguous_email' | 'staff_account'; user?: dir.User };

async function candidateOf(
  store: Store,
  provider: UpstreamProvider,
  org: dir.Organization,
  attributes: UpstreamAssertion['attributes'],
): Promise<dir.User | CandidateRefusal | undefined> {
  switch (provider.linkBy) {
    case 'email': {
      const email = asciiSingle(attributes, 'email');
      if (!email || single(attributes, 'email_verified') !== 'true') return undefined;
      const users = await dir.usersWithEmailIn(store.db, org.id, normalizeEmail(email), 2);
      // Two accounts with the address: which person signed in cannot be told.
      if (users.length > 1) return { refusal: 'no_account', detail: 'ambiguous_email' };
      const user = users[0];
      if (!user) return undefined;
      // An account with a staff role is never taken over by whoever controls its address upstream.
      if ((await rolesOfUser(store.db, user.id)).length > 0)
        return { refusal: 'no_account', detail: 'staff_account', user };
      return user;
    }
    case 'eppn': {
      const eppn = asciiSingle(attributes, 'eppn');
      if (!eppn || eppnProblem(normalizeEppn(eppn))) return undefined;
      const user = await dir.findUserByEppn(store.db, normalizeEppn(eppn));
      return user && user.org_id === org.id ? user : undefined;
    }
    case 'external_id': {
      const externalId = single(attributes, 'external_id');
      if (!externalId) return undefined;
      return repo.findUserByExternalId(store.db, org.id, externalId);
    }
    default:
      return undefined;
  }
}

/** Audits a refused upstream sign-in or link (the reason may say more than the refusal page does). */
export async function recordRefusal(
  store: Store,
  provider: UpstreamProvider,
  subject: string,
  reason: string,
  { actor = SYSTEM, now = Date.now(), user }: Change & { user?: Pick<dir.User, 'eppn'> } = {},
): Promise<void> {
  await recordAudit(store.db, {
    action: 'upstream.refused',
    actor,
    at: now,
    subject: `upstream:${provider.id}`,
    orgId: provider.orgId,
    eppn: user?.eppn ?? null,
    details: { upstream: provider.id, upstream_subject: subject.slice(0, 256), reason },
  });
}

/**
 * The account this upstream identity signs in to, linking it on the first sign-in where the
 * provider's rules allow. Refusals are audited (upstream.refused) by the caller's recordRefusal.
 */
export async function resolveAccount(
  store: Store,
  provider: UpstreamProvider,
  assertion: UpstreamAssertion,
  change: Change = {},
): Promise<LinkOutcome> {
  const now = change.now ?? Date.now();
  const existing = await repo.findLinkBySubject(store.db, provider.id, assertion.subject);
  if (existing) {
    const user = await dir.findUserById(store.db, Number(existing.user_id));
    if (!user) return { ok: false, reason: 'no_account' };
    if (user.org_id !== provider.orgId) return { ok: false, reason: 'wrong_organization', user };
    if (accountDisabled(user)) return { ok: false, reason: 'disabled', user };
    await repo.touchLink(store.db, provider.id, assertion.subject, now);
    return { ok: true, user, how: 'linked' };
  }
  const org = await dir.findOrganization(store.db, provider.orgId);
  if (!org) return { ok: false, reason: 'no_account' };
  const found = await candidateOf(store, provider, org, assertion.attributes);
  if (found && 'refusal' in found) {
    await recordRefusal(store, provider, assertion.subject, found.detail, { ...change, now, user: found.user });
    return { ok: false, reason: found.refusal, ...(found.user ? { user: found.user } : {}) };
  }
  const candidate = found;
  // The identity's secondary id (namespace:subject) held by another account: the identity is that account's.
  if (provider.namespace) {
    const owner = await repo.secondaryIdOwner(store.db, provider.namespace, assertion.subject);
    if (owner !== undefined && owner !== candidate?.id) {
      await recordRefusal(store, provider, assertion.subject, 'secondary_id_taken', {
        ...change,
        now,
        user: candidate,
      });
      return { ok: false, reason: 'identity_linked_elsewhere', ...(candidate ? { user: candidate } : {}) };
    }
  }
  if (candidate) {
    // the account's own state and its organization's, as for every sign-in
    if (accountDisabled({ disabled_at: candidate.disabled_at, org_disabled_at: org.disabled_at }))
      return { ok: false, reason: 'disabled', user: candidate };
    const linked = await createLink(store, provider, candidate, assertion.subject, { ...change, now }, 'sign-in');
    return linked === 'ok'
      ? { ok: true, user: candidate, how: 'matched' }
      : { ok: false, reason: linked, user: candidate };
  }
  // A disabled organization gets no new accounts: refused as when the provider creates none.
  if (!provider.createUsers || org.disabled_at !== null) return { ok: false, reason: 'no_account' };
  const user = await createUser(store, provider, org, assertion, { ...change, now });
  const linked = await createLink(store, provider, user, assertion.subject, { ...change, now }, 'created');
  return linked === 'ok' ? { ok: true, user, how: 'created' } : { ok: false, reason: linked, user };
}

/**
 * Links the account to the identity, in one transaction with its audit record (and the
 * identity's secondary id where the provider has a namespace). Refused when either is linked
 * already: a link is never moved.
 */
async function createLink(
  store: Store,
  provider: UpstreamProvider,
  user: dir.User,
  subject: string,
  { actor = SYSTEM, now = Date.now() }: Change,
  how: string,
): Promise<'ok' | 'account_linked_elsewhere' | 'identity_linked_elsewhere'> {
  try {
    return await store.db.transaction().execute(async (trx) => {
      const bySubject = await repo.findLinkBySubject(trx, provider.id, subject);
      if (bySubject) return Number(bySubject.user_id) === user.id ? 'ok' : 'identity_linked_elsewhere';
      if (await repo.findLinkOfUser(trx, provider.id, user.id)) return 'account_linked_elsewhere';
      await repo.insertLink(trx, {
        provider_id: provider.id,
        user_id: user.id,
        subject,
        created_at: now,
        last_used_at: now,
      });
      if (provider.namespace) {
        const owner = await repo.secondaryIdOwner(trx, provider.namespace, subject);
        if (owner !== undefined && owner !== user.id) throw new SecondaryIdTaken();
        if (owner === undefined) await insertUserId(trx, user.id, provider.namespace, subject);
        await publish(trx, 'user', user.sub);
      }
      await recordAudit(trx, {
        action: 'upstream.link',
        actor,
        at: now,
        subject: `upstream:${provider.id}`,
        orgId: provider.orgId,
        eppn: user.eppn,
        details: { upstream: provider.id, upstream_subject: subject.slice(0, 256), how },
      });
      return 'ok' as const;
    });
  } catch (err) {
    // Two first sign-ins at once: the other one linked (or took the secondary id).
    if (err instanceof SecondaryIdTaken || isUniqueViolation(err)) return 'identity_linked_elsewhere';
    throw err;
  }
}

class SecondaryIdTaken extends Error {}

const LOCAL_PART = /[^a-z0-9._-]/g;

/** A new account for a person the organization does not know yet, from the mapped attributes. */
async function createUser(
  store: Store,
  provider: UpstreamProvider,
  org: dir.Organization,
  assertion: UpstreamAssertion,
  change: Change,
): Promise<dir.User> {
  const a = assertion.attributes;
  const verifiedEmail = single(a, 'email_verified') === 'true' ? asciiSingle(a, 'email') : undefined;
  const candidates: string[] = [];
  const eppn = asciiSingle(a, 'eppn');
  if (eppn && realmOf(normalizeEppn(eppn)) === org.realm) candidates.push(normalizeEppn(eppn));
  // A username from the address only when the address is in the organization's own domain:
  // president@gmail.com is not president@<realm>.
  if (verifiedEmail && realmOf(normalizeEmail(verifiedEmail)) === org.realm) {
    const local = normalizeEmail(verifiedEmail).split('@')[0]!.replace(LOCAL_PART, '').slice(0, 64);
    if (local) candidates.push(`${local}@${org.realm}`);
  }
  const digest = createHash('sha256').update(`${provider.id}:${assertion.subject}`).digest('hex').slice(0, 16);
  candidates.push(`u${digest}@${org.realm}`);
  const given = single(a, 'given_name');
  const family = single(a, 'family_name');
  const name = (single(a, 'name') ?? ([given, family].filter(Boolean).join(' ') || verifiedEmail || 'New user')).slice(
    0,
    200,
  );
  for (const candidate of candidates) {
    if (eppnProblem(candidate) || (await dir.findUserByEppn(store.db, candidate))) continue;
    try {
      return await addUser(
        store,
        {
          orgId: org.id,
          eppn: candidate,
          name,
          ...(verifiedEmail ? { email: verifiedEmail } : {}),
          directory: {
            ...(given ? { given_name: given.slice(0, 200) } : {}),
            ...(family ? { family_name: family.slice(0, 200) } : {}),
            ...(verifiedEmail ? { email_verified: 1 } : {}),
          },
        },
        change,
      );
    } catch (err) {
      if ((err as { status?: number }).status === 409 || (err as { status?: number }).status === 400) continue;
      throw err;
    }
  }
  throw conflict('no free username for the new account');
}

export interface LinkView {
  upstream: string;
  name: string;
  type: string;
  subject: string;
  namespace: string | null;
  created_at: string;
  last_used_at: string | null;
}

export async function linksOfUser(store: Store, userId: number): Promise<LinkView[]> {
  return (await repo.listLinksOfUser(store.db, userId)).map((l) => ({
    upstream: l.provider_id,
    name: l.provider_name,
    type: l.provider_type,
    subject: l.subject,
    namespace: l.namespace,
    created_at: iso(Number(l.created_at)),
    last_used_at: l.last_used_at === null ? null : iso(Number(l.last_used_at)),
  }));
}

/** An administrator links an account to an upstream identity (for --link-by none). */
export async function linkAccount(
  store: Store,
  providerId: string,
  eppnInput: string,
  subject: string,
  change: Change = {},
): Promise<LinkView> {
  const provider = await loadProvider(store, providerId);
  const user = await dir.findUserByEppn(store.db, normalizeEppn(eppnInput));
  if (!user) throw notFound(`user '${eppnInput}' does not exist`);
  if (user.org_id !== provider.orgId) throw badRequest(`user '${user.eppn}' is not in the provider's organization`);
  if (!subject || subject.length > 512 || /[\u0000-\u001f\u007f]/.test(subject))
    throw badRequest('--subject must be 1-512 characters');
  const outcome = await createLink(store, provider, user, subject, change, 'administrator');
  if (outcome !== 'ok') {
    await recordRefusal(store, provider, subject, outcome, { ...change, user });
    throw conflict(
      outcome === 'identity_linked_elsewhere'
        ? 'that upstream identity is linked to another account (unlink it there first)'
        : `user '${user.eppn}' is linked to another identity of this provider (unlink it first)`,
    );
  }
  return (await linksOfUser(store, user.id)).find((l) => l.upstream === provider.id)!;
}

/**
 * The signed-in user links an upstream identity they just signed in with to their own account (the
 * account page): the same link, audit record and refusals as the other surfaces (an identity linked
 * to another account, an account linked to another identity of the provider, a disabled account, a
 * provider of another organization), each refusal audited. Nobody is signed in by it.
 */
export async function linkOwnIdentity(
  store: Store,
  provider: UpstreamProvider,
  user: dir.User,
  subject: string,
  change: Change = {},
): Promise<{ ok: true } | { ok: false; reason: LinkRefusal }> {
  const now = change.now ?? Date.now();
  const refused = async (reason: LinkRefusal) => {
    await recordRefusal(store, provider, subject, reason, { ...change, now, user });
    return { ok: false as const, reason };
  };
  const fresh = await dir.findUserById(store.db, user.id);
  if (!fresh) return refused('no_account');
  if (fresh.org_id !== provider.orgId) return refused('wrong_organization');
  if (accountDisabled(fresh)) return refused('disabled');
  const outcome = await createLink(store, provider, fresh, subject, { ...change, now }, 'user');
  return outcome === 'ok' ? { ok: true } : refused(outcome);
}

async function loadProvider(store: Store, id: string): Promise<UpstreamProvider> {
  const provider = await findUpstreamProvider(store, id);
  if (!provider) throw notFound(`upstream provider '${String(id).slice(0, 40)}' does not exist`);
  return provider;
}

/**
 * Removes a link (and the secondary id it brought). `requireOtherWay`: the user unlinks their own,
 * which they may only while another way to sign in remains (a passkey, a password, another link).
 * Anyone else (console staff) must be stronger than the user's roles (directory/roles.ts); a
 * refusal is audited.
 */
export async function unlinkAccount(
  store: Store,
  providerId: string,
  user: dir.User,
  { actor = SYSTEM, now = Date.now(), requireOtherWay = false }: Change & { requireOtherWay?: boolean } = {},
): Promise<void> {
  const provider = await loadProvider(store, providerId);
  const own = actor.type === 'user' && actor.id === user.eppn;
  await recordingRefusals(store, () =>
    store.db.transaction().execute(async (trx) => {
      if (!own) await requireWeaker(trx, actor, user, 'upstream.unlink', now);
      const link = await repo.findLinkOfUser(trx, provider.id, user.id);
      if (!link) throw notFound(`user '${user.eppn}' has no link to upstream provider ${provider.id}`);
      if (requireOtherWay) {
        const fresh = await dir.findUserById(trx, user.id);
        const links = await repo.listLinksOfUser(trx, user.id);
        const others = fresh && (fresh.password_hash !== null || fresh.passkey_count > 0 || links.length > 1);
        if (!others) throw conflict('this is your only way to sign in: add a passkey first');
      }
      await repo.deleteLink(trx, provider.id, user.id);
      if (provider.namespace) {
        await deleteUserId(trx, user.id, provider.namespace, link.subject);
        await publish(trx, 'user', user.sub);
      }
      await recordAudit(trx, {
        action: 'upstream.unlink',
        actor,
        at: now,
        subject: `upstream:${provider.id}`,
        orgId: provider.orgId,
        eppn: user.eppn,
        details: { upstream: provider.id, upstream_subject: link.subject.slice(0, 256) },
      });
    }),
  );
}
