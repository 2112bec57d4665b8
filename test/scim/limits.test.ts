// What one SCIM request may carry, and that the largest request allowed is handled in time while
// the service keeps answering: a listening server, /healthz polled while the request runs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { dialects } from '../helpers.ts';
import { EDU_USER, GROUP, PATCH_OP, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { insertImportedUsers } from '../../src/store/user-import.ts';

const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });
const MEMBERS_PER_PATCH = 10_000;
const OPERATIONS = 1000;
/**
 * Bounds with room for a loaded test machine: a request's own work takes well under a second here,
 * the quadratic duplicate check it replaced held the event loop for 14 s on the second shape.
 */
const TOOK_MS = 20_000;
const BLOCKED_MS = 2000;

/** A request without the kit's schema checks (they run in this process, which is also the server's). */
async function raw(k: ScimKit, method: string, path: string, body: unknown) {
  const res = await fetch(`${k.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${k.token}`, 'content-type': 'application/scim+json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** Runs `work` while /healthz is asked every 20 ms; the slowest /healthz answer and how long work took. */
async function whileProbing<T>(k: ScimKit, work: () => Promise<T>) {
  const healthz = k.base.replace(/\/scim\/v2$/, '/healthz');
  let running = true;
  let slowest = 0;
  let answered = 0;
  const probe = (async () => {
    while (running) {
      const start = performance.now();
      const res = await fetch(healthz);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      slowest = Math.max(slowest, performance.now() - start);
      answered++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const start = performance.now();
  try {
    const result = await work();
    return { result, took: performance.now() - start, slowest, answered };
  } finally {
    running = false;
    await probe;
  }
}

for (const dialect of dialects()) {
  describe(`SCIM request limits (${dialect})`, () => {
    let k: ScimKit;
    const subs: string[] = [];
    before(async () => {
      k = await scimKit(dialect);
      const now = Date.now();
      const rows = Array.from({ length: MEMBERS_PER_PATCH + 1 }, (_, i) => {
        const sub = randomUUID();
        subs.push(sub);
        return {
          ...{ sub, org_id: 1, eppn: `bulk${i}@example.org`, name: `Bulk ${i}`, email: null, nin: null },
          ...{ password_hash: null, photo_handle: null, created_at: now, updated_at: now, display_name: null },
          ...{ email_verified: 0, external_id: null, given_name: null, family_name: null, affiliation: null },
          ...{ primary_affiliation: null, org_unit: null, title: null, employee_number: null },
          ...{ student_number: null, entitlement: null },
        };
      });
      await insertImportedUsers(k.ctx.store.db, rows);
    });
    after(() => k.close());

    it('the largest PATCH allowed (1000 operations, 10000 members) finishes in time; /healthz keeps answering', async () => {
      const created = await k.call('POST', '/Groups', { schemas: [GROUP], displayName: 'Everyone' });
      assert.equal(created.status, 201);
      const id = created.body.id;
      const per = MEMBERS_PER_PATCH / OPERATIONS;
      const adds = Array.from({ length: OPERATIONS }, (_, i) => ({
        op: 'add',
        path: 'members',
        value: subs.slice(i * per, (i + 1) * per).map((value) => ({ value })),
      }));
      const added = await whileProbing(k, () => raw(k, 'PATCH', `/Groups/${id}`, patch(...adds)));
      assert.equal(added.result.status, 200, JSON.stringify(added.result.body).slice(0, 300));
      assert.equal(added.result.body.members.length, MEMBERS_PER_PATCH);
      assert.ok(added.took < TOOK_MS, `the PATCH took ${Math.round(added.took)} ms`);
      assert.ok(
        added.answered > 0 && added.slowest < BLOCKED_MS,
        `/healthz took up to ${Math.round(added.slowest)} ms`,
      );

      const removals = Array.from({ length: OPERATIONS }, (_, i) => ({
        op: 'remove',
        path: `members[${subs
          .slice(i * per, (i + 1) * per)
          .map((s) => `value eq "${s}"`)
          .join(' or ')}]`,
      }));
      const removed = await whileProbing(k, () => raw(k, 'PATCH', `/Groups/${id}`, patch(...removals)));
      assert.equal(removed.result.status, 200, JSON.stringify(removed.result.body).slice(0, 300));
      assert.equal(removed.result.body.members, undefined);
      assert.ok(removed.took < TOOK_MS, `the PATCH took ${Math.round(removed.took)} ms`);
      assert.ok(removed.slowest < BLOCKED_MS, `/healthz took up to ${Math.round(removed.slowest)} ms`);

      const put = await whileProbing(k, () =>
        raw(k, 'PUT', `/Groups/${id}`, {
          schemas: [GROUP],
          displayName: 'Everyone',
          members: subs.slice(0, MEMBERS_PER_PATCH).map((value) => ({ value })),
        }),
      );
      assert.equal(put.result.status, 200);
      assert.equal(put.result.body.members.length, MEMBERS_PER_PATCH);
      assert.ok(put.took < TOOK_MS && put.slowest < BLOCKED_MS, `PUT ${put.took} ms, /healthz up to ${put.slowest} ms`);
    });

    it('the largest PATCHes in few operations: 10000 members added in two, then removed by a value list', async () => {
      const id = (await k.call('POST', '/Groups', { schemas: [GROUP], displayName: 'Two halves' })).body.id;
      const half = MEMBERS_PER_PATCH / 2;
      const values = subs.slice(0, MEMBERS_PER_PATCH).map((value) => ({ value }));
      const added = await whileProbing(k, () =>
        raw(
          k,
          'PATCH',
          `/Groups/${id}`,
          patch(
            { op: 'add', path: 'members', value: values.slice(0, half) },
            { op: 'Add', path: 'members', value: values.slice(half) },
          ),
        ),
      );
      assert.equal(added.result.status, 200);
      assert.equal(added.result.body.members.length, MEMBERS_PER_PATCH);
      assert.ok(
        added.took < TOOK_MS && added.slowest < BLOCKED_MS,
        `${added.took} ms, /healthz up to ${added.slowest} ms`,
      );
      const removed = await whileProbing(k, () =>
        raw(k, 'PATCH', `/Groups/${id}`, patch({ op: 'remove', path: 'members', value: values })),
      );
      assert.equal(removed.result.status, 200);
      assert.equal(removed.result.body.members, undefined);
      assert.ok(
        removed.took < TOOK_MS && removed.slowest < BLOCKED_MS,
        `${removed.took} ms, /healthz up to ${removed.slowest} ms`,
      );
    });

    it('more members in one PATCH than allowed is 400 tooMany, and nothing changes', async () => {
      const created = await k.call('POST', '/Groups', { schemas: [GROUP], displayName: 'Too many' });
      const id = created.body.id;
      const r = await k.call(
        'PATCH',
        `/Groups/${id}`,
        patch(
          { op: 'add', path: 'members', value: subs.slice(0, 5000).map((value) => ({ value })) },
          { op: 'add', path: 'members', value: subs.slice(5000).map((value) => ({ value })) },
        ),
      );
      assert.equal(r.status, 400);
      assert.equal(r.body.scimType, 'tooMany');
      assert.match(r.body.detail, /at most 10000 members/);
      assert.equal((await k.call('GET', `/Groups/${id}`)).body.members, undefined);
    });

    it('more than 100 values of one attribute is 400 invalidValue', async () => {
      const values = Array.from({ length: 101 }, (_, i) => `urn:x:${i}`);
      const created = await k.call('POST', '/Users', newUser('valuecap', { [EDU_USER]: { entitlement: values } }));
      assert.equal(created.status, 400);
      assert.equal(created.body.scimType, 'invalidValue');
      assert.match(created.body.detail, /at most 100 values/);
      const user = (await k.call('POST', '/Users', newUser('valuecap'))).body.id;
      for (const Operations of [
        [{ op: 'add', path: `${EDU_USER}:entitlement`, value: values }],
        [
          { op: 'add', path: `${EDU_USER}:entitlement`, value: values.slice(0, 60) },
          { op: 'add', path: `${EDU_USER}:entitlement`, value: values.slice(60) },
        ],
      ]) {
        const r = await k.call('PATCH', `/Users/${user}`, { schemas: [PATCH_OP], Operations });
        assert.equal(r.status, 400, JSON.stringify(r.body));
        assert.equal(r.body.scimType, 'invalidValue');
        assert.match(r.body.detail, /at most 100 values/);
      }
      const many = Array.from({ length: 1001 }, () => ({ op: 'replace', path: 'title', value: 'x' }));
      assert.equal((await k.call('PATCH', `/Users/${user}`, patch(...many))).status, 400);
    });
  });
}
