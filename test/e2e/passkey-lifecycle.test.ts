// The passkey lifecycle in real Chromium with the virtual authenticator: the passkey offered after
// a password sign-in (conditional create where the browser has it, else the buttons; "Not now"
// remembered), the WebAuthn Signal API calls after passkey and password sign-ins (spied on from an
// init script), an administrator's deletion making the next sign-in call signalUnknownCredential, a
// denied AAGUID, a recovery link used in a fresh browser, and axe-core on the new pages in English
// and Norwegian Bokmål.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { cli, dialects, seedOrg, seedUser, seedClient, clientToken } from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import type { User } from '../../src/store/directory.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  seriousViolations,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
  type VirtualAuthenticator,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const CHROMIUM_VIRTUAL_AAGUID = '01020304-0506-0708-0102-030405060708';

interface Recorded {
  name: string;
  arg: Record<string, unknown>;
}

/** Records every Signal API call and every navigator.credentials.create (its mediation) of the context's pages. */
async function spyOnWebAuthn(context: BrowserContext): Promise<Recorded[]> {
  const recorded: Recorded[] = [];
  await context.exposeBinding('__webauthnSpy', (_source, entry: Recorded) => {
    recorded.push(entry);
  });
  await context.addInitScript(() => {
    const w = window as unknown as {
      __webauthnSpy(entry: unknown): void;
      PublicKeyCredential?: Record<string, unknown>;
    };
    const P = w.PublicKeyCredential;
    if (!P) return;
    for (const name of ['signalUnknownCredential', 'signalAllAcceptedCredentials', 'signalCurrentUserDetails']) {
      const original = P[name] as ((arg: unknown) => Promise<void>) | undefined;
      Object.defineProperty(P, name, {
        configurable: true,
        value: (arg: unknown) => {
          w.__webauthnSpy({ name, arg: JSON.parse(JSON.stringify(arg)) });
          return typeof original === 'function' ? original.call(P, arg) : Promise.resolve();
        },
      });
    }
    const create = navigator.credentials.create.bind(navigator.credentials);
    navigator.credentials.create = (options?: CredentialCreationOptions) => {
      const mediation = (options as { mediation?: string } | undefined)?.mediation ?? null;
      w.__webauthnSpy({ name: 'create', arg: { mediation } });
      return create(options);
    };
  });
  return recorded;
}

/** Pages of this context see a browser without conditional create: only the buttons remain. */
async function withoutConditionalCreate(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    const P = (window as unknown as { PublicKeyCredential?: Record<string, unknown> }).PublicKeyCredential;
    if (P)
      Object.defineProperty(P, 'getClientCapabilities', {
        value: async () => ({ conditionalCreate: false, conditionalGet: false }),
      });
  });
}

for (const dialect of dialects()) {
  describe(`passkey lifecycle in a browser (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let rp: RelyingParty;
    let ada: User;
    let bea: User;
    let admin: { clientId: string; secret: string };
    /** Ada's passkey as the first test's authenticator holds it (with its private key) */
    let adaCredentials: StoredCredential[] = [];

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      await seedOrg(server, 2, 'strict.org', 'Strict');
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD });
      bea = await seedUser(server, 1, 'bea@example.org', { password: PASSWORD });
      await seedUser(server, 2, 'cy@strict.org', { password: PASSWORD });
      rp = await startRelyingParty(server, { groups: ['userinfo-name', 'userid-idp'] });
      admin = await seedClient(server, { name: 'Helpdesk', scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    async function freshPage(options: { conditionalCreate?: boolean } = {}) {
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      if (options.conditionalCreate === false) await withoutConditionalCreate(context);
      const recorded = await spyOnWebAuthn(context);
      const page = await context.newPage();
      const authenticator = await addVirtualAuthenticator(page);
      return { context, page, recorded, authenticator };
    }

    const atRelyingParty = (u: URL) => u.href.startsWith(rp.redirectUri);

    /** Waits until the browser is back at the relying party, agreeing to share on a consent page on the way. */
    async function reachRelyingParty(page: Page) {
      const consent = page.locator('button[name=decision][value=allow]');
      for (let i = 0; i < 100 && !atRelyingParty(new URL(page.url())); i++) {
        if (await consent.count()) await Promise.all([page.waitForEvent('load'), consent.click()]);
        else await new Promise((r) => setTimeout(r, 100));
      }
      await page.waitForURL(atRelyingParty);
    }

    it('offers a passkey after a password sign-in: conditional create where the browser can, else the button', async () => {
      const { context, page, recorded, authenticator } = await freshPage();
      try {
        const begun = await rp.begin();
        await page.goto(begun.url);
        const capable = await page.evaluate(async () => {
          const P = PublicKeyCredential as unknown as {
            getClientCapabilities?: () => Promise<Record<string, boolean>>;
          };
          return P.getClientCapabilities ? (await P.getClientCapabilities()).conditionalCreate === true : false;
        });
        await submitPassword(page, ada.eppn, PASSWORD, { keepOffer: true });
        // Where the browser makes the passkey conditionally the page goes on by itself; else the button.
        await Promise.race([
          page.waitForURL((u) => !u.pathname.endsWith('/login')),
          page.waitForSelector('#offer-button:not([hidden])'),
        ]);
        if (await page.locator('#offer-button:not([hidden])').count()) {
          assert.equal(await page.locator('#offer-later').textContent(), 'Not now');
          await page.click('#offer-button').catch(() => undefined);
        }
        await reachRelyingParty(page);
        const tokens = await rp.finish(page.url(), begun);
        assert.deepEqual(tokens.claims()!.amr, ['pwd']);
        const stored = await listUserCredentials(server.store.db, ada.id);
        assert.equal(stored.length, 1, 'a passkey was made');
        adaCredentials = await authenticator.credentials();
        assert.equal(adaCredentials.length, 1);
        const creates = recorded.filter((r) => r.name === 'create').map((r) => r.arg.mediation);
        if (capable) assert.ok(creates.includes('conditional'), `conditional create asked for: ${creates.join(',')}`);
        else assert.ok(creates.length >= 1);
        const metrics = await (await fetch(`${server.url}/metrics`)).text();
        assert.match(metrics, /idp_passkey_upgrade_total\{outcome="offered"\} [1-9]/);
        assert.match(metrics, /idp_passkey_upgrade_total\{outcome="created"\} [1-9]/);
      } finally {
        await context.close();
      }
    });

    it('"Not now" continues to the client and is remembered in that browser', async () => {
      const { context, page } = await freshPage({ conditionalCreate: false });
      try {
        for (const round of [1, 2]) {
          const begun = await rp.begin({ prompt: 'login' });
          await page.goto(begun.url);
          await submitPassword(page, bea.eppn, PASSWORD, { keepOffer: true });
          if (round === 1) {
            assert.match((await page.textContent('h1')) ?? '', /Sign in faster next time/);
            await page.waitForSelector('#offer-button:not([hidden])');
            assert.equal(await page.locator('#offer-button').textContent(), 'Create a passkey');
            await Promise.all([page.waitForEvent('load'), page.click('#offer-later')]);
          }
          await reachRelyingParty(page);
          assert.equal((await rp.finish(page.url(), begun)).claims()!.sub, bea.sub, `round ${round}`);
        }
        assert.equal((await listUserCredentials(server.store.db, bea.id)).length, 0);
        const metrics = await (await fetch(`${server.url}/metrics`)).text();
        // The registry is the process's: the other database's run counts too.
        assert.match(metrics, /idp_passkey_upgrade_total\{outcome="declined"\} [1-9]/);
      } finally {
        await context.close();
      }
    });

    it('after a passkey sign-in the credential manager hears the accepted passkeys and the names', async () => {
      const { context, page, recorded, authenticator } = await freshPage();
      try {
        await addCredentials(authenticator, adaCredentials);
        const begun = await rp.begin();
        await page.goto(begun.url);
        await page.waitForSelector('#passkey-button:not([hidden])');
        await page.click('#passkey-button');
        await reachRelyingParty(page);
        const tokens = await rp.finish(page.url(), begun);
        assert.equal(tokens.claims()!.sub, ada.sub);
        const all = await reported(recorded, 'signalAllAcceptedCredentials');
        assert.deepEqual(all?.arg, {
          rpId: 'localhost',
          userId: Buffer.from(ada.sub).toString('base64url'),
          allAcceptedCredentialIds: (await listUserCredentials(server.store.db, ada.id)).map((p) =>
            Buffer.from(p.credential_id).toString('base64url'),
          ),
        });
        const details = recorded.find((r) => r.name === 'signalCurrentUserDetails');
        assert.deepEqual(details?.arg, {
          rpId: 'localhost',
          userId: Buffer.from(ada.sub).toString('base64url'),
          name: 'ada@example.org',
          displayName: 'Ada Lovelace',
        });
        assert.equal(recorded.filter((r) => r.name === 'signalUnknownCredential').length, 0);
      } finally {
        await context.close();
      }
    });

    it('after a password sign-in of a user with passkeys the credential manager hears them too', async () => {
      const { context, page, recorded } = await freshPage();
      try {
        const begun = await rp.begin();
        await page.goto(begun.url);
        await submitPassword(page, 'ada@example.org', PASSWORD);
        await reachRelyingParty(page);
        assert.equal((await rp.finish(page.url(), begun)).claims()!.sub, ada.sub);
        const accepted = (await listUserCredentials(server.store.db, ada.id)).map((p) =>
          Buffer.from(p.credential_id).toString('base64url'),
        );
        assert.ok(accepted.length > 0);
        const all = await reported(recorded, 'signalAllAcceptedCredentials');
        assert.deepEqual(all?.arg, {
          rpId: 'localhost',
          userId: Buffer.from(ada.sub).toString('base64url'),
          allAcceptedCredentialIds: accepted,
        });
        const details = await reported(recorded, 'signalCurrentUserDetails');
        assert.equal(details?.arg.displayName, 'Ada Lovelace');
      } finally {
        await context.close();
      }
    });

    it("an administrator's deletion makes the next sign-in with that passkey fail and signal it unknown", async () => {
      const { context, page, recorded, authenticator } = await freshPage();
      try {
        await addCredentials(authenticator, adaCredentials);
        const [passkey] = await listUserCredentials(server.store.db, ada.id);
        const token = await clientToken(server, admin.clientId, admin.secret, 'passkey.delete');
        const res = await fetch(`${server.url}/2/passkey/1/${passkey!.id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(res.status, 200);
        const begun = await rp.begin();
        await page.goto(begun.url);
        await page.waitForSelector('#passkey-button:not([hidden])');
        await Promise.all([page.waitForEvent('load'), page.click('#passkey-button')]);
        assert.match((await page.textContent('.alert')) ?? '', /passkey/i);
        const unknown = await reported(recorded, 'signalUnknownCredential');
        assert.deepEqual(unknown?.arg, {
          rpId: 'localhost',
          credentialId: Buffer.from(passkey!.credential_id).toString('base64url'),
        });
      } finally {
        await context.close();
      }
    });

    it('a denied AAGUID cannot register; the account page says why', async () => {
      const deny = await cli(server.config.databaseUrl, [
        'org',
        'policy',
        '2',
        '--deny-aaguid',
        CHROMIUM_VIRTUAL_AAGUID,
      ]);
      assert.equal(deny.code, 0, deny.err);
      const { context, page } = await freshPage();
      try {
        await page.goto(`${server.url}/account`);
        await submitPassword(page, 'cy@strict.org', PASSWORD);
        await page.waitForSelector('#register-button:not([hidden])');
        await Promise.all([page.waitForEvent('load'), page.click('#register-button')]);
        assert.match((await page.textContent('.alert')) ?? '', /does not allow passkeys from this authenticator/);
        const cy = await server.store.db.selectFrom('passkeys').selectAll().where('org_id', '=', 2).execute();
        assert.equal(cy.length, 0);
      } finally {
        await context.close();
      }
    });

    it('a recovery link lets the user register a passkey in a fresh browser, once', async () => {
      const made = await cli(server.config.databaseUrl, ['recovery', 'create', bea.eppn, '--json'], '', {
        PUBLIC_URL: server.url,
      });
      const { url } = JSON.parse(made.out) as { url: string };
      const { context, page } = await freshPage();
      try {
        await page.goto(url);
        assert.match((await page.textContent('h1')) ?? '', /Register a new passkey/);
        assert.deepEqual(await seriousViolations(page), [], 'recovery page');
        await page.waitForSelector('#recovery-button:not([hidden])');
        await Promise.all([page.waitForEvent('load'), page.click('#recovery-button')]);
        assert.match((await page.textContent('.message')) ?? '', /new passkey is registered/);
        assert.equal((await listUserCredentials(server.store.db, bea.id)).length, 1);
        await page.goto(url);
        assert.match((await page.textContent('.message')) ?? '', /cannot be used/);
      } finally {
        await context.close();
      }
    });

    it('the new pages have no serious or critical axe-core violation, in English and Bokmål', async () => {
      for (const locale of ['en', 'nb']) {
        const { context, page } = await freshPage({ conditionalCreate: false });
        try {
          const dave = await seedUser(server, 1, `dave-${locale}@example.org`, { password: PASSWORD });
          await page.goto(`${server.url}/language/${locale}?return=/account`);
          const begun = await rp.begin();
          await page.goto(begun.url);
          await submitPassword(page, dave.eppn, PASSWORD, { keepOffer: true });
          await page.waitForSelector('#offer-button:not([hidden])');
          assert.equal(await page.getAttribute('html', 'lang'), locale);
          assert.deepEqual(await seriousViolations(page), [], `offer page (${locale})`);
          await Promise.all([page.waitForEvent('load'), page.click('#offer-button')]);
          await reachRelyingParty(page);
          await page.goto(`${server.url}/account`);
          assert.equal(await page.locator('li.passkey').count(), 1);
          assert.deepEqual(await seriousViolations(page), [], `account page with a passkey (${locale})`);
          await Promise.all([page.waitForEvent('load'), page.click('#remove-password')]);
          assert.deepEqual(await seriousViolations(page), [], `remove password confirmation (${locale})`);
          await Promise.all([page.waitForEvent('load'), page.click('#remove-password')]);
          assert.match(page.url(), /done=password_removed/);
        } finally {
          await context.close();
        }
      }
    });
  });
}

/** Another device of the user: the passkey the first test made, copied into this browser's authenticator. */
type StoredCredential = Awaited<ReturnType<VirtualAuthenticator['credentials']>>[number];

async function addCredentials(authenticator: VirtualAuthenticator, credentials: StoredCredential[]) {
  for (const credential of credentials)
    await authenticator.cdp.send('WebAuthn.addCredential', {
      authenticatorId: authenticator.authenticatorId,
      credential: { ...credential },
    });
}

/** Waits (bounded) until the page has reported a call named name. */
async function reported(recorded: Recorded[], name: string): Promise<Recorded | undefined> {
  for (let i = 0; i < 50 && !recorded.some((r) => r.name === name); i++) await new Promise((r) => setTimeout(r, 100));
  return recorded.find((r) => r.name === name);
}
