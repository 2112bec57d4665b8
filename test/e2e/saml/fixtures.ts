// What the SAML single sign-on tests share: the service's IdP metadata for the peers, a user with
// directory attributes, and a sign-in through the service's own pages in Chromium.
import type { Page } from 'playwright-core';
import { setDirectoryColumns } from '../../../src/directory/provisioning.ts';
import { directoryColumns } from '../../../src/directory/directory-attributes.ts';
import { seedOrg, seedUser } from '../../helpers.ts';
import { submitPassword, type E2EServer } from '../helpers.ts';

export const PASSWORD = 'correct horse battery staple';

/** The service's IdP metadata, as the peers load it from its URL (the entityID). */
export async function idpMetadataOf(server: E2EServer): Promise<string> {
  const res = await fetch(`${server.url}/saml2/idp/metadata`);
  if (!res.ok) throw new Error(`the IdP metadata answered ${res.status}`);
  return res.text();
}

/** Ada, with the directory attributes SCIM would have given her, and a display name that is not XML. */
export async function seedAda(server: E2EServer) {
  await seedOrg(server);
  const user = await seedUser(server, 1, 'ada@example.org', {
    name: 'Ada Lovelace',
    email: 'ada@mail.example.org',
    password: PASSWORD,
  });
  return setDirectoryColumns(
    server.store,
    user,
    directoryColumns({
      givenName: 'Ada',
      familyName: 'Lovelace',
      displayName: 'Ada <b>&amp; "Byron" ]]> </b>',
      affiliation: ['member', 'faculty'],
      primaryAffiliation: 'faculty',
      entitlement: ['urn:mace:example.org:entitlement:library'],
    }),
  );
}

/** At the service's sign-in page: sign in with the password, and agree to share when asked. */
export async function signInAndAgree(page: Page, server: E2EServer): Promise<void> {
  if (!page.url().startsWith(`${server.url}/interaction/`)) throw new Error(`not at the sign-in page: ${page.url()}`);
  await submitPassword(page, 'ada@example.org', PASSWORD);
  if (await page.locator('button[name=decision][value=allow]').count()) {
    await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=allow]')]);
  }
}
