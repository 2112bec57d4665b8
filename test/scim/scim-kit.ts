// What the SCIM tests share: an app listening on a free port, a provisioning token of organization 1
// (realm example.org) and one of organization 2, a fetch wrapper, and every returned resource
// checked against the core schemas by SCIMMY, an independent SCIM implementation.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import SCIMMY from 'scimmy';
import { seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import { createScimToken } from '../../src/directory/provisioning.ts';
import type { Dialect } from '../../src/store/index.ts';

export const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
export const EDU_USER = 'urn:passkey-idp:params:scim:schemas:extension:education:2.0:User';
export const PASSWORD_USER = 'urn:passkey-idp:params:scim:schemas:extension:password:2.0:User';
export const EDU_GROUP = 'urn:passkey-idp:params:scim:schemas:extension:education:2.0:Group';
export const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';

export interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

export interface ScimKit {
  ctx: TestContext;
  base: string;
  token: string;
  otherToken: string;
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>, token?: string): Promise<Answer>;
  close(): Promise<void>;
}

type Json = Record<string, any>;

/** SCIMMY's own definitions of the core User and Group (RFC 7643 section 4): a resource that breaks them throws. */
export function checkResource(resource: Json): void {
  const schemas: string[] = resource.schemas;
  assert.ok(Array.isArray(schemas), 'schemas is a list');
  const core = schemas.includes(USER)
    ? SCIMMY.Schemas.User
    : schemas.includes(GROUP)
      ? SCIMMY.Schemas.Group
      : undefined;
  assert.ok(core, `a User or Group: ${JSON.stringify(schemas)}`);
  const { [ENTERPRISE]: enterprise, [EDU_USER]: _e, [EDU_GROUP]: _g, ...coreOnly } = resource;
  core.definition.coerce({ ...coreOnly, schemas: [core.definition.id] });
  if (enterprise) SCIMMY.Schemas.EnterpriseUser.definition.coerce({ ...enterprise, schemas: [ENTERPRISE] });
  assert.ok(resource.meta?.version?.startsWith('W/"'), 'a weak version');
}

export async function scimKit(dialect: Dialect): Promise<ScimKit> {
  const ctx = await startTestApp(dialect, {}, { listen: 0 });
  const port = (ctx.app.server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}/scim/v2`;
  await seedOrg(ctx);
  await seedOrg(ctx, 2, 'other.org', 'Other');
  const { token } = await createScimToken(ctx.store, 1, 'Entra ID');
  const { token: otherToken } = await createScimToken(ctx.store, 2, 'Okta');
  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, use = token) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${use}`,
        ...(body === undefined ? {} : { 'content-type': 'application/scim+json' }),
        ...headers,
      },
      body:
        body === undefined
          ? undefined
          : typeof body === 'string'
            ? body
            : Buffer.isBuffer(body)
              ? new Uint8Array(body)
              : JSON.stringify(body),
    });
    const text = await res.text();
    const parsed = text ? JSON.parse(text) : undefined;
    if (res.status < 300 && parsed) {
      if (parsed.schemas?.includes(LIST))
        parsed.Resources.filter((r: Json) => r.schemas?.includes(USER) || r.schemas?.includes(GROUP)).forEach(
          checkResource,
        );
      else if (parsed.schemas?.includes(USER) || parsed.schemas?.includes(GROUP)) checkResource(parsed);
    }
    if (res.status >= 400) {
      assert.match(res.headers.get('content-type') ?? '', /^application\/scim\+json/);
      assert.deepEqual(parsed.schemas, [ERROR]);
      assert.equal(parsed.status, String(res.status));
    }
    return { status: res.status, headers: res.headers, body: parsed };
  }
  return { ctx, base, token, otherToken, call, close: () => ctx.close() };
}

export function newUser(local: string, extra: Json = {}): Json {
  return {
    schemas: [USER],
    userName: `${local}@example.org`,
    externalId: `ext-${local}`,
    name: { givenName: local[0]!.toUpperCase() + local.slice(1), familyName: 'Tester', formatted: `${local} Tester` },
    displayName: `${local} T.`,
    emails: [{ value: `${local}@example.org`, type: 'work', primary: true }],
    active: true,
    ...extra,
  };
}
