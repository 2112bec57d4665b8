// `client` commands: relying parties and API clients, their grants, scopes and organizations.
import * as clients from '../../clients/index.ts';
import { iso } from '../../time.ts';
import { badRequest } from '../../errors.ts';
import { API_SCOPES, ATTRIBUTE_GROUPS } from '../../vocabulary.ts';
import {
  by,
  durationOption,
  existingOrgs,
  optional,
  orgList,
  repeated,
  required,
  table,
  type CommandDef,
  type Ctx,
  type OptionDef,
  type Values,
} from '../command.ts';

function clientView(c: clients.Client) {
  return {
    client_id: c.clientId,
    name: c.name,
    protocol: c.protocol,
    type: c.public ? 'public' : 'confidential',
    grant_types: c.grantTypes,
    scopes: c.scopes,
    groups: c.groups,
    organizations: c.adminOrgs,
    checkuser_organizations: c.checkuserOrgs,
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.postLogoutRedirectUris,
    backchannel_logout_uri: c.backchannelLogoutUri,
    frontchannel_logout_uri: c.frontchannelLogoutUri,
    first_party: c.firstParty,
    userinfo_signed_response_alg: c.userinfoSignedResponseAlg,
    require_pushed_authorization_requests: c.requirePar,
    introspection: c.introspection,
    created_at: iso(c.createdAt),
    status: c.disabledAt === null ? 'active' : 'disabled',
    previous_secret_valid_until: c.previousSecretExpiresAt === null ? null : iso(c.previousSecretExpiresAt),
  };
}

function showClient(ctx: Ctx, c: clients.Client, secret?: string | null) {
  const view = { ...clientView(c), ...(secret ? { client_secret: secret } : {}) };
  if (ctx.json) return view;
  const lines = Object.entries(view).map(
    ([k, v]) => `${k.padEnd(28)} ${Array.isArray(v) ? v.join(' ') || '-' : (v ?? '-')}`,
  );
  if (secret) lines.push('', 'The client secret is shown only now; store it safely.');
  return lines.join('\n');
}

const CLIENT_ID = [{ name: 'client_id', description: 'the client' }];
const INTROSPECTION: OptionDef = {
  type: 'boolean',
  description:
    "a resource server: may introspect the access tokens of its organizations' users (--orgs) and the service's JWT access tokens (docs/tokens.md)",
};

/** --introspection sets, --no-introspection clears, neither leaves it. */
function introspectionChange(v: Values): boolean | undefined {
  if (v.introspection === true && v['no-introspection'] === true)
    throw badRequest('give --introspection or --no-introspection, not both');
  if (v.introspection === true) return true;
  return v['no-introspection'] === true ? false : undefined;
}
const ORGS: OptionDef = {
  type: 'string',
  value: '<id,...>',
  required: true,
  description: 'organization ids, comma-separated',
};

/** A command on one existing client that changes it and shows the result. */
function change(
  name: string,
  summary: string,
  options: Record<string, OptionDef>,
  apply: (ctx: Ctx, id: string, v: Values) => Promise<clients.Client>,
): CommandDef {
  return {
    group: 'client',
    name,
    summary,
    args: CLIENT_ID,
    options,
    run: async (ctx, v, [id]) => showClient(ctx, await apply(ctx, id!, v)),
  };
}

function rotate(name: string, summary?: string): CommandDef {
  return {
    group: 'client',
    name,
    summary:
      summary ?? 'new secret; the old one keeps working during the overlap (default 1d; --overlap 0 ends it at once)',
    args: CLIENT_ID,
    options: {
      overlap: {
        type: 'string',
        value: '<duration>',
        description: 'how long the old secret still works: 0, 90s, 30m, 12h, 7d',
      },
    },
    async run(ctx, v, [id]) {
      const overlap = optional(v, 'overlap');
      const overlapMs = overlap === undefined ? clients.DEFAULT_SECRET_OVERLAP_MS : durationOption(overlap, 'overlap');
      const r = await clients.rotateSecret(ctx.store, ctx.keys, id!, { ...by(ctx), overlapMs });
      const until = r.previousValidUntil === null ? null : iso(r.previousValidUntil);
      if (ctx.json) return { client_id: id, client_secret: r.secret, previous_secret_valid_until: until };
      const old = until === null ? 'The old secret no longer works.' : `The old secret works until ${until}.`;
      return `new secret for ${id}: ${r.secret}\n${old} This secret is shown only now.`;
    },
  };
}

function enable(name: 'enable' | 'disable', enabled: boolean, summary: string): CommandDef {
  return {
    group: 'client',
    name,
    summary,
    args: CLIENT_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const r = await clients.setClientEnabled(ctx.store, id!, enabled, by(ctx));
      if (ctx.json) return { ...clientView(r.client), changed: r.changed };
      return r.changed ? `client ${id} ${name}d` : `client ${id} was already ${name}d`;
    },
  };
}

const add: CommandDef = {
  group: 'client',
  name: 'add',
  summary: 'register a client; prints client_id and the secret, the secret only this once',
  options: {
    name: { type: 'string', value: '<name>', required: true, description: 'display name, shown on the consent page' },
    scopes: {
      type: 'string',
      value: '"..."',
      description: `allowed scopes, space- or comma-separated (API: ${API_SCOPES.join(' ')})`,
    },
    groups: {
      type: 'string',
      value: '"..."',
      description: `attribute groups, space- or comma-separated (${ATTRIBUTE_GROUPS.join(' ')})`,
    },
    orgs: { type: 'string', value: '<id,...>', description: 'organizations it may administer through the passkey API' },
    'redirect-uri': {
      type: 'string',
      multiple: true,
      value: '<uri>',
      description: 'sign-in redirect URI (https; http for localhost only)',
    },
    'post-logout-redirect-uri': {
      type: 'string',
      multiple: true,
      value: '<uri>',
      description: 'where to return after logout',
    },
    'backchannel-logout-uri': {
      type: 'string',
      value: '<uri>',
      description: 'where logout tokens are POSTed when the user signs out (OIDC Back-Channel Logout)',
    },
    'frontchannel-logout-uri': {
      type: 'string',
      value: '<uri>',
      description: 'loaded in a hidden iframe with iss and sid when the user signs out (OIDC Front-Channel Logout)',
    },
    grant: {
      type: 'string',
      multiple: true,
      value: '<grant>',
      description:
        'grant types: authorization_code, refresh_token, client_credentials, device_code (or urn:ietf:params:oauth:grant-type:device_code; sign-in on devices without a browser, no redirect URI needed) (repeat or separate with commas); default: authorization_code refresh_token with --redirect-uri, client_credentials for API scopes or without redirect URIs',
    },
    'first-party': { type: 'boolean', description: 'skip the consent page (the operator’s own applications)' },
    public: { type: 'boolean', description: 'no secret (browser or native app; PKCE required, no client_credentials)' },
    'userinfo-signed-alg': {
      type: 'string',
      value: 'RS256|ES256',
      description: 'answer /openid/userinfo as a signed JWT',
    },
    'require-par': {
      type: 'boolean',
      description: 'accept only authorization requests pushed to /oauth/par first (RFC 9126)',
    },
    introspection: INTROSPECTION,
  },
  async run(ctx, v) {
    const { client, secret } = await clients.createClient(
      ctx.store,
      ctx.keys,
      {
        name: required(v, 'name'),
        scopes: clients.parseList(optional(v, 'scopes')),
        groups: clients.parseList(optional(v, 'groups')),
        orgs: orgList(optional(v, 'orgs')),
        redirectUris: repeated(v, 'redirect-uri'),
        postLogoutRedirectUris: repeated(v, 'post-logout-redirect-uri'),
        backchannelLogoutUri: optional(v, 'backchannel-logout-uri'),
        frontchannelLogoutUri: optional(v, 'frontchannel-logout-uri'),
        grantTypes: repeated(v, 'grant')?.flatMap((g) => clients.parseList(g)),
        firstParty: v['first-party'] === true,
        public: v.public === true,
        userinfoSignedResponseAlg: optional(v, 'userinfo-signed-alg'),
        requirePar: v['require-par'] === true,
        introspection: v.introspection === true,
      },
      by(ctx),
    );
    return showClient(ctx, client, secret);
  },
};

export const clientCommands: CommandDef[] = [
  add,
  {
    group: 'client',
    name: 'list',
    summary: 'list clients (never their secrets)',
    options: {},
    async run(ctx) {
      const all = (await clients.listClients(ctx.store)).map(clientView);
      if (ctx.json) return all;
      return table(
        all.map((c) => ({
          ...c,
          scopes: c.scopes.join(' '),
          groups: c.groups.join(' '),
          organizations: c.organizations.join(','),
        })),
        ['client_id', 'name', 'type', 'scopes', 'groups', 'organizations'],
      );
    },
  },
  {
    group: 'client',
    name: 'show',
    summary: 'show a client (never its secret)',
    args: CLIENT_ID,
    options: {},
    run: async (ctx, _v, [id]) => showClient(ctx, await clients.getClient(ctx.store, id!)),
  },
  rotate('secret rotate'),
  rotate('rotate-secret', 'same as client secret rotate'),
  change(
    'update',
    'change redirect URIs, groups, scopes, grant types, name or introspection; every option replaces the list it names',
    {
      name: { type: 'string', value: '<name>', description: 'display name' },
      'redirect-uri': {
        type: 'string',
        multiple: true,
        value: '<uri>',
        description: 'sign-in redirect URIs (replaces all)',
      },
      'post-logout-redirect-uri': {
        type: 'string',
        multiple: true,
        value: '<uri>',
        description: 'post-logout redirect URIs (replaces all)',
      },
      groups: { type: 'string', value: '"..."', description: 'attribute groups; "" removes all' },
      scopes: { type: 'string', value: '"..."', description: 'allowed scopes; "" removes all' },
      grant: { type: 'string', multiple: true, value: '<grant>', description: 'grant types (replaces all)' },
      introspection: INTROSPECTION,
      'no-introspection': { type: 'boolean', description: 'stop introspecting tokens issued to other clients' },
    },
    (ctx, id, v) =>
      clients.updateClient(
        ctx.store,
        id,
        {
          name: optional(v, 'name'),
          redirectUris: repeated(v, 'redirect-uri'),
          postLogoutRedirectUris: repeated(v, 'post-logout-redirect-uri'),
          groups: v.groups === undefined ? undefined : clients.parseList(optional(v, 'groups')),
          scopes: v.scopes === undefined ? undefined : clients.parseList(optional(v, 'scopes')),
          grantTypes: repeated(v, 'grant')?.flatMap((g) => clients.parseList(g)),
          introspection: introspectionChange(v),
        },
        by(ctx),
      ),
  ),
  enable('disable', false, 'refuse the client at once: no sign-in or token; its grants and tokens are revoked'),
  enable('enable', true, 'accept a disabled client again'),
  {
    group: 'client',
    name: 'remove',
    summary: "delete a client with its grants, tokens, organization grants and users' consents",
    args: CLIENT_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const r = await clients.removeClient(ctx.store, id!, by(ctx));
      return ctx.json ? { client_id: id, removed: true, artifacts_deleted: r.artifacts } : `client ${id} removed`;
    },
  },
  change(
    'set-groups',
    'replace the authorized attribute groups',
    {
      groups: {
        type: 'string',
        value: '"..."',
        required: 'use --groups "" to remove all',
        description: 'attribute groups; "" removes all',
      },
    },
    (ctx, id, v) => clients.setGroups(ctx.store, id, clients.parseList(optional(v, 'groups')), by(ctx)),
  ),
  change(
    'set-scopes',
    'replace the allowed scopes',
    {
      scopes: {
        type: 'string',
        value: '"..."',
        required: true,
        description: 'allowed scopes, space- or comma-separated',
      },
    },
    (ctx, id, v) => clients.setScopes(ctx.store, id, clients.parseList(optional(v, 'scopes')), by(ctx)),
  ),
  change(
    'grant-orgs',
    'organizations the client may administer through the passkey API',
    { orgs: ORGS },
    async (ctx, id, v) =>
      clients.grantOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'admin', by(ctx)),
  ),
  change('revoke-orgs', 'stop the client administering organizations', { orgs: ORGS }, async (ctx, id, v) =>
    clients.revokeOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'admin', by(ctx)),
  ),
  change(
    'grant-checkuser',
    'organizations the client may query for user existence',
    { orgs: ORGS },
    async (ctx, id, v) =>
      clients.grantOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'checkuser', by(ctx)),
  ),
  change(
    'revoke-checkuser',
    'stop the client querying organizations for user existence',
    { orgs: ORGS },
    async (ctx, id, v) =>
      clients.revokeOrganizations(ctx.store, id, await existingOrgs(ctx, required(v, 'orgs')), 'checkuser', by(ctx)),
  ),
];
