// A directory of three organizations, and clients with and without user-existence access.
import { grantOrganizations } from '../../src/clients/index.ts';
import { insertUserId } from '../../src/store/directory.ts';
import { seedClient, seedOrg, seedUser, clientToken, startTestApp, type TestContext } from '../helpers.ts';
import type { Dialect } from '../../src/store/index.ts';

export const NINS = { alice: '01017012345', bob: '02027012345', carol: '03037012345' };

export interface CheckuserWorld {
  ctx: TestContext;
  /** all three check-user scopes, configured for organizations 1 and 2 */
  checker: { clientId: string; secret: string };
  /** system-check-user-existence, no organizations configured */
  unconfigured: { clientId: string; secret: string };
  tokens: {
    current: string; // checker, system-check-user-existence
    legacy: string; // checker, gk_checkuser gk_checkuser_systemlookup
    unconfigured: string;
    passkey: string; // a passkey API token: another audience
    gkOnly: string; // gk_checkuser without gk_checkuser_systemlookup, configured for org 1
  };
}

export async function checkuserWorld(
  dialect: Dialect,
  env: Record<string, string> = {},
  now?: () => number,
): Promise<CheckuserWorld> {
  const ctx = await startTestApp(dialect, env, { now });
  await seedOrg(ctx, 1, 'example.org', 'Example University');
  await seedOrg(ctx, 2, 'other.org', 'Other College');
  await seedOrg(ctx, 3, 'third.org', 'Third School');
  const alice = await seedUser(ctx, 1, 'alice@example.org', { email: 'Alice.Smith@Example.org', nin: NINS.alice });
  await seedUser(ctx, 2, 'bob@other.org', { email: 'bob@other.org', nin: NINS.bob });
  const carol = await seedUser(ctx, 3, 'carol@third.org', { email: 'carol@third.org', nin: NINS.carol });
  await insertUserId(ctx.store.db, alice.id, 'edugain', 'alice@edu.example');
  await insertUserId(ctx.store.db, carol.id, 'edugain', 'carol@edu.example');
  await insertUserId(ctx.store.db, alice.id, 'facebook', '10001234');

  const all = ['system-check-user-existence', 'gk_checkuser', 'gk_checkuser_systemlookup'];
  const checker = await seedClient(ctx, { name: 'Provisioning', scopes: all });
  await grantOrganizations(ctx.store, checker.clientId, [1, 2], 'checkuser');
  const unconfigured = await seedClient(ctx, { name: 'Unconfigured', scopes: all });
  const passkeyClient = await seedClient(ctx, { name: 'Helpdesk', scopes: ['passkey.read'], orgs: [1] });
  const gkOnly = await seedClient(ctx, { name: 'Gatekeeper only', scopes: ['gk_checkuser'] });
  await grantOrganizations(ctx.store, gkOnly.clientId, [1], 'checkuser');

  return {
    ctx,
    checker,
    unconfigured,
    tokens: {
      current: await clientToken(ctx, checker.clientId, checker.secret, 'system-check-user-existence'),
      legacy: await clientToken(ctx, checker.clientId, checker.secret, 'gk_checkuser gk_checkuser_systemlookup'),
      unconfigured: await clientToken(ctx, unconfigured.clientId, unconfigured.secret, 'system-check-user-existence'),
      passkey: await clientToken(ctx, passkeyClient.clientId, passkeyClient.secret, 'passkey.read'),
      gkOnly: await clientToken(ctx, gkOnly.clientId, gkOnly.secret, 'gk_checkuser'),
    },
  };
}

export function get(
  ctx: TestContext,
  url: string,
  token?: string,
  method: 'GET' | 'POST' | 'DELETE' | 'PUT' | 'HEAD' = 'GET',
) {
  return ctx.app.inject({ method, url, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
}
