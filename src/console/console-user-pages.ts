// The helpdesk's pages: find a user, see their passkeys, delete one or all with a reason, and
// create or revoke a recovery link. Each route: signedIn -> organizationOf -> memberOf ->
// (checkCsrf -> the domain function the API calls too) -> the page.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { listUserCredentials } from '../store/passkeys.ts';
import { searchUsers } from '../store/user-search.ts';
import type { User } from '../store/directory.ts';
import { authenticatorDisplay } from '../webauthn/mds.ts';
import { removeOrganizationPasskey, removeUserPasskeys } from '../webauthn/passkey-removal.ts';
import { createRecoveryLink, recoveryLinks, revokeLink } from '../webauthn/recovery-links.ts';
import { inviteUsers } from '../webauthn/invitations.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';
import { linksOfUser, unlinkAccount } from '../upstream/linking.ts';
import { positiveId } from '../http/organization-grant.ts';
import { AppError } from '../errors.ts';
import { mayActOn } from '../directory/roles.ts';
import {
  formText,
  memberOf,
  orgContext,
  reasonOf,
  redirect,
  sendHtml,
  staffActor,
  type ConsoleDeps,
  type Context,
} from './console-kit.ts';
import type { ConsoleKey } from './console-i18n.ts';
import {
  confirmView,
  recoveryCreatedView,
  searchView,
  TTL_SECONDS,
  userPath,
  userView,
  type ConsolePasskey,
} from './console-views.ts';

const SEARCH_LIMIT = 50;

type OrgParams = { org_id: string };
type UserParams = OrgParams & { eppn: string };
type PasskeyParams = UserParams & { id: string };

async function userContext(
  deps: ConsoleDeps,
  request: FastifyRequest<{ Params: UserParams }>,
  reply: FastifyReply,
  post = false,
): Promise<(Context & { user: User }) | undefined> {
  const ctx = await orgContext(deps, request, reply, { post });
  if (!ctx) return undefined;
  const user = await memberOf(deps, request, reply, ctx, request.params.eppn);
  return user ? { ...ctx, user } : undefined;
}

// ---- find a user ---------------------------------------------------------------------------

async function search(deps: ConsoleDeps, request: FastifyRequest<{ Params: OrgParams }>, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply);
  if (!ctx) return reply;
  const raw = (request.query as Record<string, unknown>).q;
  const q = typeof raw === 'string' ? raw.trim().slice(0, 200) : '';
  const hits = q ? await searchUsers(deps.store.db, ctx.org.id, q, SEARCH_LIMIT + 1) : undefined;
  const shown = hits?.slice(0, SEARCH_LIMIT).map((h) => ({
    eppn: h.eppn,
    name: h.display_name ?? h.name,
    email: h.email,
    passkeys: h.passkeys,
    disabled: h.disabled_at !== null,
  }));
  const more = hits && hits.length > SEARCH_LIMIT ? SEARCH_LIMIT : 0;
  return sendHtml(reply, 200, searchView(ctx.staff.view, ctx.org, q, shown, more));
}

// ---- a user's page -------------------------------------------------------------------------

const DONE: Record<string, ConsoleKey> = {
  deleted_one: 'console.deleted_one',
  deleted_all: 'console.deleted_all',
  revoked: 'console.revoked',
  invited: 'console.invited',
  unlinked: 'console.unlinked',
};

async function passkeysOf(deps: ConsoleDeps, user: User): Promise<ConsolePasskey[]> {
  const rows = await listUserCredentials(deps.store.db, user.id);
  return Promise.all(
    rows.map(async (r) => {
      const shown = await authenticatorDisplay(deps.store.db, r.aaguid, deps.config.aaguidData);
      return {
        id: r.id,
        label: r.label,
        authenticator: shown.name,
        icon: shown.icon,
        iconDark: shown.iconDark,
        createdAt: r.created_at,
        lastUsedAt: r.last_used_at,
        userVerified: r.mfa_verified === 1,
        synced: r.backup_eligible === 1,
      };
    }),
  );
}

/** Whether the staff member may act on the user (directory/roles.ts): the page offers no action the change would refuse. */
const staffMayAct = (deps: ConsoleDeps, { staff, user }: { staff: Context['staff']; user: User }) =>
  mayActOn(deps.store.db, { type: 'user', id: staff.user.eppn }, user);

async function renderUser(
  deps: ConsoleDeps,
  reply: FastifyReply,
  { staff, org, user }: Context & { user: User },
  flash: { notice?: string; error?: string } = {},
  status = 200,
) {
  const links = await recoveryLinks(deps.store, { eppn: user.eppn, orgId: org.id }, deps.now());
  const mayAct = await staffMayAct(deps, { staff, user });
  const page = userView(staff.view, {
    org,
    user: {
      eppn: user.eppn,
      name: user.display_name ?? user.name,
      email: user.email,
      disabled: user.disabled_at !== null,
      hasPassword: user.password_hash !== null,
    },
    passkeys: await passkeysOf(deps, user),
    links: links.map((l) => ({ id: l.id, state: l.state, expires: l.expires_at, createdBy: l.created_by })),
    upstreamLinks: (await linksOfUser(deps.store, user.id)).map((l) => ({
      upstream: l.upstream,
      name: l.name,
      subject: l.subject,
      linkedAt: l.created_at,
    })),
    mayAct,
    mail: deps.config.smtpUrl !== undefined,
    ...flash,
  });
  return sendHtml(reply, status, page);
}

async function showUser(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply);
  if (!ctx) return reply;
  const query = request.query as Record<string, unknown>;
  const done = typeof query.done === 'string' && Object.hasOwn(DONE, query.done) ? DONE[query.done] : undefined;
  const count = typeof query.n === 'string' && /^[0-9]{1,6}$/.test(query.n) ? query.n : '0';
  return renderUser(deps, reply, ctx, { notice: done && ctx.staff.view.t(done, { count }) });
}

/** A change the staff member may not make (a user with a role as strong as theirs): the user's page, 403, saying why. */
function refused(deps: ConsoleDeps, reply: FastifyReply, ctx: Context & { user: User }, err: unknown) {
  if (err instanceof AppError && err.status === 403) return renderUser(deps, reply, ctx, { error: err.message }, 403);
  throw err;
}

// ---- deleting passkeys -----------------------------------------------------------------------

async function targetPasskey(deps: ConsoleDeps, user: User, rawId: string) {
  const id = positiveId(rawId);
  const rows = await listUserCredentials(deps.store.db, user.id);
  return id === undefined ? undefined : rows.find((r) => r.id === id);
}

async function confirmOne(deps: ConsoleDeps, request: FastifyRequest<{ Params: PasskeyParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply);
  if (!ctx) return reply;
  const passkey = await targetPasskey(deps, ctx.user, request.params.id);
  if (!passkey) return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.error_passkey_gone') }, 404);
  if (!(await staffMayAct(deps, ctx))) return renderUser(deps, reply, ctx, {}, 403);
  const view = { org: ctx.org, eppn: ctx.user.eppn, passkey: { id: passkey.id, label: passkey.label }, count: 1 };
  return sendHtml(reply, 200, confirmView(ctx.staff.view, view));
}

async function deleteOne(deps: ConsoleDeps, request: FastifyRequest<{ Params: PasskeyParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const passkey = await targetPasskey(deps, ctx.user, request.params.id);
  if (!passkey) return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.error_passkey_gone') }, 404);
  const reason = reasonOf(request);
  if (!reason) {
    const view = {
      org: ctx.org,
      eppn: ctx.user.eppn,
      passkey: { id: passkey.id, label: passkey.label },
      count: 1,
      error: ctx.staff.view.t('console.error_reason'),
      reason: formText(request, 'reason', 500),
    };
    return sendHtml(reply, 400, confirmView(ctx.staff.view, view));
  }
  const actor = { who: staffActor(ctx.staff, request), requestId: request.id, ip: request.ip, reason, at: deps.now() };
  try {
    await removeOrganizationPasskey(deps.store, actor, ctx.org.id, passkey.id);
  } catch (err) {
    return refused(deps, reply, ctx, err);
  }
  return redirect(reply, `${userPath(ctx.org.id, ctx.user.eppn)}?done=deleted_one`);
}

async function confirmAll(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply);
  if (!ctx) return reply;
  const count = (await listUserCredentials(deps.store.db, ctx.user.id)).length;
  if (count === 0) return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.passkeys_none') });
  if (!(await staffMayAct(deps, ctx))) return renderUser(deps, reply, ctx, {}, 403);
  return sendHtml(reply, 200, confirmView(ctx.staff.view, { org: ctx.org, eppn: ctx.user.eppn, count }));
}

async function deleteAll(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const reason = reasonOf(request);
  if (!reason) {
    const count = (await listUserCredentials(deps.store.db, ctx.user.id)).length;
    const error = ctx.staff.view.t('console.error_reason');
    const view = { org: ctx.org, eppn: ctx.user.eppn, count, error, reason: formText(request, 'reason', 500) };
    return sendHtml(reply, 400, confirmView(ctx.staff.view, view));
  }
  const actor = { who: staffActor(ctx.staff, request), requestId: request.id, ip: request.ip, reason, at: deps.now() };
  let removed;
  try {
    removed = await removeUserPasskeys(deps.store, actor, ctx.org.id, ctx.user.eppn);
  } catch (err) {
    return refused(deps, reply, ctx, err);
  }
  const { ids, sub } = removed;
  if (sub !== undefined) await endUserSessions(deps.store, deps.provider.current(), sub, deps.now);
  return redirect(reply, `${userPath(ctx.org.id, ctx.user.eppn)}?done=deleted_all&n=${ids.length}`);
}

// ---- recovery links --------------------------------------------------------------------------

async function createLink(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const ttl = Number(formText(request, 'ttl', 10));
  const ttlSeconds = TTL_SECONDS.includes(ttl) ? ttl : 86_400;
  try {
    const link = await createRecoveryLink(
      deps.store,
      deps.config.publicUrl,
      {
        eppn: ctx.user.eppn,
        ttlMs: ttlSeconds * 1000,
        deleteOthers: formText(request, 'delete_others', 5) === 'yes',
        orgId: ctx.org.id,
      },
      { actor: staffActor(ctx.staff, request), now: deps.now() },
    );
    const view = { org: ctx.org, eppn: ctx.user.eppn, url: link.url, expires: link.expires_at };
    return sendHtml(reply, 200, recoveryCreatedView(ctx.staff.view, view));
  } catch (err) {
    // A disabled user gets no link: the form is not offered, but a page may be stale.
    if (err instanceof AppError && err.status === 400) return renderUser(deps, reply, ctx, { error: err.message }, 400);
    return refused(deps, reply, ctx, err);
  }
}

async function revoke(deps: ConsoleDeps, request: FastifyRequest<{ Params: PasskeyParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const id = positiveId(request.params.id);
  const mine = (await recoveryLinks(deps.store, { eppn: ctx.user.eppn, orgId: ctx.org.id }, deps.now())).some(
    (l) => l.id === id && l.state === 'usable',
  );
  if (id === undefined || !mine)
    return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.page_not_found') }, 404);
  await revokeLink(deps.store, id, { actor: staffActor(ctx.staff, request), now: deps.now() }, ctx.org.id);
  return redirect(reply, `${userPath(ctx.org.id, ctx.user.eppn)}?done=revoked`);
}

// ---- an invitation by e-mail ---------------------------------------------------------------------

async function invite(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const setup = { publicUrl: deps.config.publicUrl, mail: deps.config.smtpUrl !== undefined };
  const result = await inviteUsers(
    deps.store,
    deps.keys,
    setup,
    { orgId: ctx.org.id, eppns: [ctx.user.eppn] },
    { actor: staffActor(ctx.staff, request), now: deps.now() },
  );
  const [skipped] = result.skipped;
  if (skipped)
    return renderUser(
      deps,
      reply,
      ctx,
      { error: ctx.staff.view.t('console.invite_failed') },
      skipped.reason === 'refused' ? 403 : 400,
    );
  return redirect(reply, `${userPath(ctx.org.id, ctx.user.eppn)}?done=invited`);
}

// ---- linked upstream identities ------------------------------------------------------------------

/** Removes a link with the function the admin CLI and the account page use (audited, role-checked). */
async function unlink(deps: ConsoleDeps, request: FastifyRequest<{ Params: UserParams }>, reply: FastifyReply) {
  const ctx = await userContext(deps, request, reply, true);
  if (!ctx) return reply;
  const upstream = formText(request, 'upstream', 40);
  const linked =
    upstream !== undefined && (await linksOfUser(deps.store, ctx.user.id)).some((l) => l.upstream === upstream);
  if (!linked) return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.error_link_gone') }, 404);
  try {
    await unlinkAccount(deps.store, upstream, ctx.user, { actor: staffActor(ctx.staff, request), now: deps.now() });
  } catch (err) {
    if (err instanceof AppError && err.status === 404)
      return renderUser(deps, reply, ctx, { error: ctx.staff.view.t('console.error_link_gone') }, 404);
    return refused(deps, reply, ctx, err);
  }
  return redirect(reply, `${userPath(ctx.org.id, ctx.user.eppn)}?done=unlinked`);
}

export function userPages(deps: ConsoleDeps) {
  return async function consoleUserPages(app: FastifyInstance) {
    const base = '/console/org/:org_id';
    app.get<{ Params: OrgParams }>(base, (q, r) => search(deps, q, r));
    app.get<{ Params: UserParams }>(`${base}/users/:eppn`, (q, r) => showUser(deps, q, r));
    app.get<{ Params: PasskeyParams }>(`${base}/users/:eppn/passkeys/:id/delete`, (q, r) => confirmOne(deps, q, r));
    app.post<{ Params: PasskeyParams }>(`${base}/users/:eppn/passkeys/:id/delete`, (q, r) => deleteOne(deps, q, r));
    app.get<{ Params: UserParams }>(`${base}/users/:eppn/delete-all`, (q, r) => confirmAll(deps, q, r));
    app.post<{ Params: UserParams }>(`${base}/users/:eppn/delete-all`, (q, r) => deleteAll(deps, q, r));
    app.post<{ Params: UserParams }>(`${base}/users/:eppn/recovery-links`, (q, r) => createLink(deps, q, r));
    app.post<{ Params: UserParams }>(`${base}/users/:eppn/invite`, (q, r) => invite(deps, q, r));
    app.post<{ Params: UserParams }>(`${base}/users/:eppn/upstream-links/unlink`, (q, r) => unlink(deps, q, r));
    app.post<{ Params: PasskeyParams }>(`${base}/users/:eppn/recovery-links/:id/revoke`, (q, r) => revoke(deps, q, r));
  };
}
