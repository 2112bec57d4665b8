// What sign-in refuses, in a real browser against a listening server: each refusal is a clear
// page (or error), and nothing changes: no session, no counter or last-use update.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPrivateKey, sign } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { clearOfWindowEnd, dialects, seedOrg, seedUser } from '../helpers.ts';
import { listUserCredentials, recordPasskeyUse } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import type { User } from '../../src/store/directory.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
  type VirtualAuthenticator,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const GENERIC = 'The username or password is wrong.';

interface Opened {
  uid: string;
  csrf: string;
}

/** Starts an authorization request and stops on the sign-in page. */
async function openSignIn(page: Page, rp: RelyingParty, params: Record<string, string> = {}): Promise<Opened> {
  const begun = await rp.begin(params);
  await page.goto(begun.url);
  const action = (await page.getAttribute('#password-form', 'action'))!;
  const uid = /^\/interaction\/([^/]+)\/login$/.exec(action)![1]!;
  return { uid, csrf: (await page.getAttribute('#password-form input[name=_csrf]', 'value'))! };
}

async function signedInToAccount(page: Page, server: E2EServer): Promise<boolean> {
  const res = await page.request.get(`${server.url}/account`);
  return (await res.text()).includes('<h1>Your account</h1>');
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** An assertion signed with the passkey's own private key, for any RP ID. */
function craftAssertion(
  credential: { credentialId: string; privateKey: string; userHandle?: string },
  rpId: string,
  origin: string,
  challenge: string,
  counter: number,
): string {
  const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge, origin, crossOrigin: false }));
  const authenticatorData = Buffer.concat([
    createHash('sha256').update(rpId).digest(),
    Buffer.from([0x05]),
    u32(counter),
  ]);
  const key = createPrivateKey({ key: Buffer.from(credential.privateKey, 'base64'), format: 'der', type: 'pkcs8' });
  const signature = sign(
    'sha256',
    Buffer.concat([authenticatorData, createHash('sha256').update(clientDataJSON).digest()]),
    key,
  );
  const id = Buffer.from(credential.credentialId, 'base64').toString('base64url');
  return JSON.stringify({
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: clientDataJSON.toString('base64url'),
      authenticatorData: authenticatorData.toString('base64url'),
      signature: signature.toString('base64url'),
      ...(credential.userHandle
        ? { userHandle: Buffer.from(credential.userHandle, 'base64').toString('base64url') }
        : {}),
    },
  });
}

for (const dialect of dialects()) {
  describe(`sign-in refusals (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    let authenticator: VirtualAuthenticator;
    let rp: RelyingParty;
    let ada: User;

    before(async () => {
      await clearOfWindowEnd(15 * 60 * 1000, 60_000); // the sign-in limits' window
      server = await startServer(dialect, { LOGIN_RATE_LIMIT_ACCOUNT: '3' });
      await seedOrg(server);
      ada = await seedUser(server, 1, 'ada@example.org', { password: PASSWORD });
      await seedUser(server, 1, 'bob@example.org', { password: PASSWORD });
      rp = await startRelyingParty(server, { firstParty: true });
      browser = await launchBrowser();
      context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      page = await context.newPage();
      authenticator = await addVirtualAuthenticator(page);
      // Ada registers a passkey on /account, then signs out of the browser.
      await page.goto(`${server.url}/account`);
      await Promise.all([page.waitForURL(`${server.url}/account`), submitPassword(page, ada.eppn, PASSWORD)]);
      await Promise.all([page.waitForURL(`${server.url}/account?done=added`), page.click('#register-button')]);
      await context.clearCookies();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    const passkeyRow = async () => (await listUserCredentials(server.store.db, ada.id))[0]!;

    it('a wrong password and an unknown user get the same page and status, and no session', async () => {
      await openSignIn(page, rp);
      const wrong = page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST');
      await submitPassword(page, ada.eppn, 'not the password');
      const wrongStatus = (await wrong).status();
      const wrongText = await page.textContent('.alert');
      const unknown = page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST');
      await submitPassword(page, 'nobody@example.org', 'not the password');
      assert.equal(wrongStatus, 401);
      assert.equal((await unknown).status(), 401);
      assert.equal(wrongText, GENERIC);
      assert.equal(await page.textContent('.alert'), GENERIC);
      assert.equal(await page.inputValue('#password'), '', 'the password is never echoed back');
      assert.equal(await signedInToAccount(page, server), false);
    });

    it('a form without its CSRF token is refused and signs nobody in', async () => {
      const { uid } = await openSignIn(page, rp);
      const res = await page.request.post(`${server.url}/interaction/${uid}/login`, {
        form: { username: ada.eppn, password: PASSWORD },
        maxRedirects: 0,
      });
      assert.equal(res.status(), 403);
      assert.match(await res.text(), /This form has expired or was sent from another page/);
      const forged = await page.request.post(`${server.url}/interaction/${uid}/login`, {
        form: { _csrf: 'x'.repeat(43), username: ada.eppn, password: PASSWORD },
        maxRedirects: 0,
      });
      assert.equal(forged.status(), 403);
      const options = await page.request.post(`${server.url}/interaction/${uid}/passkey/options`);
      assert.equal(options.status(), 403);
      assert.equal(await signedInToAccount(page, server), false);
    });

    it('account changes without the CSRF token are refused and change nothing', async () => {
      await page.goto(`${server.url}/account`);
      await Promise.all([page.waitForURL(`${server.url}/account`), submitPassword(page, ada.eppn, PASSWORD)]);
      const row = await passkeyRow();
      const del = await page.request.post(`${server.url}/account/passkeys/${row.id}/delete`, {
        form: { confirm: 'yes' },
        maxRedirects: 0,
      });
      assert.equal(del.status(), 403);
      const rename = await page.request.post(`${server.url}/account/passkeys/${row.id}/rename`, {
        form: { label: 'Stolen' },
        maxRedirects: 0,
      });
      assert.equal(rename.status(), 403);
      const register = await page.request.post(`${server.url}/account/passkeys/options`);
      assert.equal(register.status(), 403);
      assert.deepEqual(await passkeyRow(), row);
      await context.clearCookies();
    });

    it('a replayed WebAuthn assertion is refused in the same interaction and on the same binding', async () => {
      const regressions = async () =>
        (await listAuditEvents(server.store.db, {})).filter((e) => e.kind === 'passkey.counter_regression').length;
      let captured: string | undefined;
      const capture = (r: import('playwright-core').Request) => {
        if (r.method() === 'POST' && /\/(interaction\/[^/]+|account)\/passkey$/.test(r.url()))
          captured = new URLSearchParams(r.postData() ?? '').get('response') ?? undefined;
      };
      page.on('request', capture);
      try {
        // The interaction it was made for: once used, it signs nobody in again.
        const opened = await openSignIn(page, rp);
        await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.click('#passkey-button')]);
        assert.ok(captured, 'assertion captured');
        const used = await passkeyRow();
        await context.clearCookies({ name: /session/ });
        const again = await page.request.post(`${server.url}/interaction/${opened.uid}/passkey`, {
          form: { _csrf: opened.csrf, response: captured },
          maxRedirects: 0,
        });
        assert.ok([400, 401].includes(again.status()), `refused: ${again.status()}`);
        assert.equal(again.headers()['location'], undefined);
        assert.deepEqual(await passkeyRow(), used, 'counter and last use unchanged');
        assert.equal(await signedInToAccount(page, server), false);

        // The account page binds its challenges to the browser's sign-in form, which outlives a
        // sign-in: the same browser replays the same assertion with the same form token.
        captured = undefined;
        await page.goto(`${server.url}/account`);
        const csrf = (await page.getAttribute('#password-form input[name=_csrf]', 'value'))!;
        await page.waitForSelector('#passkey-button:not([hidden])');
        await Promise.all([page.waitForEvent('load'), page.click('#passkey-button')]);
        assert.match((await page.textContent('h1')) ?? '', /Your account/);
        assert.ok(captured, 'assertion captured');
        await context.clearCookies({ name: /session/ });
        assert.equal(await signedInToAccount(page, server), false);
        const signedIn = await passkeyRow();
        const before = await regressions();
        const replay = await page.request.post(`${server.url}/account/passkey`, {
          form: { _csrf: csrf, response: captured },
          maxRedirects: 0,
        });
        assert.equal(replay.status(), 401);
        assert.match(await replay.text(), /Signing in with that passkey did not work/);
        assert.equal(await signedInToAccount(page, server), false);
        assert.deepEqual(await passkeyRow(), signedIn, 'counter and last use unchanged');
        assert.equal(await regressions(), before, 'refused for its used challenge, before any counter check');
      } finally {
        page.off('request', capture);
        await context.clearCookies();
      }
    });

    it('an assertion made for another RP ID is refused; the same key for this RP ID is accepted', async () => {
      const [credential] = await authenticator.credentials();
      const before = await passkeyRow();
      const opened = await openSignIn(page, rp);
      const challengeFor = async () => {
        const res = await page.request.post(`${server.url}/interaction/${opened.uid}/passkey/options`, {
          headers: { 'x-csrf-token': opened.csrf },
        });
        assert.equal(res.status(), 200);
        return ((await res.json()) as { challenge: string; rpId: string }).challenge;
      };
      const foreign = craftAssertion(
        credential!,
        'evil.example',
        server.url,
        await challengeFor(),
        Number(before.sign_count) + 10,
      );
      const refused = await page.request.post(`${server.url}/interaction/${opened.uid}/passkey`, {
        form: { _csrf: opened.csrf, response: foreign },
        maxRedirects: 0,
      });
      assert.equal(refused.status(), 401);
      assert.deepEqual(await passkeyRow(), before);
      const wrongOrigin = craftAssertion(
        credential!,
        'localhost',
        'https://evil.example',
        await challengeFor(),
        Number(before.sign_count) + 10,
      );
      const refusedOrigin = await page.request.post(`${server.url}/interaction/${opened.uid}/passkey`, {
        form: { _csrf: opened.csrf, response: wrongOrigin },
        maxRedirects: 0,
      });
      assert.equal(refusedOrigin.status(), 401);
      const genuine = craftAssertion(
        credential!,
        'localhost',
        server.url,
        await challengeFor(),
        Number(before.sign_count) + 10,
      );
      const accepted = await page.request.post(`${server.url}/interaction/${opened.uid}/passkey`, {
        form: { _csrf: opened.csrf, response: genuine },
        maxRedirects: 0,
      });
      assert.equal(accepted.status(), 303);
      assert.equal(Number((await passkeyRow()).sign_count), Number(before.sign_count) + 10);
      await context.clearCookies();
    });

    it('a sign counter that goes backwards is refused and written to the audit log', async () => {
      const row = await passkeyRow();
      await recordPasskeyUse(server.store.db, row.id, 1_000_000, row.backup_state === 1, row.last_used_at!);
      const raised = await passkeyRow();
      await openSignIn(page, rp);
      const response = page.waitForResponse((r) => /\/passkey$/.test(r.url()) && r.request().method() === 'POST');
      await page.click('#passkey-button');
      assert.equal((await response).status(), 401);
      await page.waitForSelector('.alert');
      assert.match((await page.textContent('.alert'))!, /Signing in with that passkey did not work/);
      assert.deepEqual(await passkeyRow(), raised, 'counter and last use unchanged');
      const events = (await listAuditEvents(server.store.db, {})).filter(
        (e) => e.kind === 'passkey.counter_regression',
      );
      assert.equal(events.length, 1);
      assert.equal(events[0]!.eppn, ada.eppn);
      assert.deepEqual(JSON.parse(events[0]!.passkey_ids), [row.id]);
      assert.equal(JSON.parse(events[0]!.details).stored_counter, 1_000_000);
      assert.equal(await signedInToAccount(page, server), false);
    });

    it('after too many failures an account is refused even with the right password, known or not', async () => {
      for (const eppn of ['bob@example.org', 'ghost@example.org']) {
        await openSignIn(page, rp);
        for (let i = 0; i < 3; i++) await submitPassword(page, eppn, 'wrong password');
        const limited = page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST');
        await submitPassword(page, eppn, PASSWORD);
        const res = await limited;
        assert.equal(res.status(), 429);
        assert.ok(Number(res.headers()['retry-after']) > 0);
        assert.equal(await page.textContent('.alert'), 'Too many sign-in attempts. Wait a few minutes and try again.');
      }
      assert.equal(await signedInToAccount(page, server), false);
    });
  });

  describe(`sign-in rate limit per client IP (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let rp: RelyingParty;

    before(async () => {
      await clearOfWindowEnd(15 * 60 * 1000, 60_000); // the sign-in limits' window
      server = await startServer(dialect, { LOGIN_RATE_LIMIT_IP: '3' });
      await seedOrg(server);
      await seedUser(server, 1, 'ada@example.org', { password: PASSWORD });
      rp = await startRelyingParty(server, { firstParty: true });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    it('refuses every attempt from the address once its budget is spent, with a clear page', async () => {
      const page = await browser.newPage();
      await openSignIn(page, rp);
      for (const eppn of ['a@example.org', 'b@example.org', 'c@example.org'])
        await submitPassword(page, eppn, 'wrong password');
      const limited = page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST');
      await submitPassword(page, 'ada@example.org', PASSWORD);
      assert.equal((await limited).status(), 429);
      assert.equal(await page.textContent('.alert'), 'Too many sign-in attempts. Wait a few minutes and try again.');
      assert.equal(await signedInToAccount(page, server), false);
    });
  });
}
