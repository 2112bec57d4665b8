// eduPersonTargetedID is released only if asked for: to an SP whose metadata requests it and whose
// groups include userid-idp, as a NameID holding the SP's persistent NameID; never to others.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addServiceProvider, samlKeys } from '../../src/service-providers/index.ts';
import {
  childElements,
  NS,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
  type Element,
} from '../../src/saml/xml/index.ts';
import { dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { spEntity } from '../saml/federation-fixtures.ts';
import { authnRequestXml, redirectQuery } from './sso-fixtures.ts';
import { injectBrowser, postedResponse, signInAndAgree, type PageBrowser } from './sign-in-fixtures.ts';

const EPTID = 'urn:oid:1.3.6.1.4.1.5923.1.1.1.10';
const EPPN = 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6';
const PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
const PASSWORD = 'correct horse battery staple';

/** Registered SPs: whether their metadata requests it, their NameID and groups. */
const SPS = {
  persistent: {
    entityId: 'https://persistent.example.edu/sp',
    requests: true,
    nameId: 'persistent',
    groups: ['userid-idp'],
  },
  transient: {
    entityId: 'https://transient.example.edu/sp',
    requests: true,
    nameId: 'transient',
    groups: ['userid-idp'],
  },
  silent: { entityId: 'https://silent.example.edu/sp', requests: false, nameId: 'persistent', groups: ['userid-idp'] },
  mailOnly: { entityId: 'https://mail.example.edu/sp', requests: true, nameId: 'persistent', groups: ['email'] },
} as const;
const acsOf = (entityId: string) => `https://${new URL(entityId).host}/Shibboleth.sso/SAML2/POST`;

const metadataOf = (sp: (typeof SPS)[keyof typeof SPS]) =>
  spEntity({
    entityId: sp.entityId,
    requestedAttributes: sp.requests ? [EPPN, EPTID] : [EPPN],
  }).replace('<md:EntityDescriptor ', '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" ');

for (const dialect of dialects()) {
  describe(`eduPersonTargetedID (${dialect})`, () => {
    let ctx: TestContext;
    let browser: PageBrowser;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD, email: 'ada@mail.example.org' });
      for (const sp of Object.values(SPS))
        await addServiceProvider(ctx.store, { metadata: metadataOf(sp), nameId: sp.nameId, groups: [...sp.groups] });
      browser = injectBrowser(ctx.app);
    });
    after(async () => ctx?.close());

    /** One single sign-on to the SP, as a browser: its Response's assertion, checked. */
    const signIn = async (entityId: string) => {
      const start = await browser.get(
        `/saml2/idp/sso?${redirectQuery(authnRequestXml(ctx, { issuer: entityId, acsUrl: acsOf(entityId) }))}`,
      );
      const page = await signInAndAgree(browser, start, { username: 'ada@example.org', password: PASSWORD });
      const parsed = postedResponse(page, acsOf(entityId));
      await validateSchema(parsed, 'protocol');
      const assertion = childElements(parsed.root, NS.assertion, 'Assertion')[0]!;
      const keys = await samlKeys(ctx.store, ctx.keys);
      verifyEnvelopedSignature(parsed, assertion, { keys: [keys.signing.certificate] });
      const subject = childElements(childElements(assertion, NS.assertion, 'Subject')[0]!, NS.assertion, 'NameID')[0];
      const attributes = childElements(assertion, NS.assertion, 'AttributeStatement').flatMap((s) =>
        childElements(s, NS.assertion, 'Attribute'),
      );
      return { subject, attributes, targeted: attributes.filter((a) => a.getAttribute('Name') === EPTID) };
    };
    const nameIdOf = (attribute: Element) => {
      const values = childElements(attribute, NS.assertion, 'AttributeValue');
      assert.equal(values.length, 1);
      const [nameId] = childElements(values[0]!, NS.assertion, 'NameID');
      assert.ok(nameId, 'the value is a saml:NameID');
      return nameId;
    };

    it('is released to an SP that requests it, as its persistent NameID with both qualifiers', async () => {
      const { subject, attributes, targeted } = await signIn(SPS.persistent.entityId);
      assert.equal(targeted.length, 1);
      assert.equal(targeted[0]!.getAttribute('FriendlyName'), 'eduPersonTargetedID');
      assert.equal(targeted[0]!.getAttribute('NameFormat'), 'urn:oasis:names:tc:SAML:2.0:attrname-format:uri');
      const nameId = nameIdOf(targeted[0]!);
      assert.equal(nameId.getAttribute('Format'), PERSISTENT);
      assert.equal(nameId.getAttribute('NameQualifier'), `${ctx.config.publicUrl}/saml2/idp/metadata`);
      assert.equal(nameId.getAttribute('SPNameQualifier'), SPS.persistent.entityId);
      assert.equal(subject?.getAttribute('Format'), PERSISTENT);
      assert.equal(textOf(nameId), textOf(subject!), 'the same value as the persistent NameID');
      assert.ok(attributes.some((a) => a.getAttribute('Name') === EPPN));
    });

    it('is the persistent value for the SP even when the SP receives a transient NameID, stable, and per SP', async () => {
      const first = await signIn(SPS.transient.entityId);
      const second = await signIn(SPS.transient.entityId);
      assert.match(first.subject!.getAttribute('Format')!, /transient$/);
      assert.notEqual(textOf(first.subject!), textOf(second.subject!), 'a new transient NameID each time');
      const value = textOf(nameIdOf(first.targeted[0]!));
      assert.equal(textOf(nameIdOf(second.targeted[0]!)), value, 'the targeted id stays');
      assert.notEqual(value, textOf(first.subject!));
      const other = await signIn(SPS.persistent.entityId);
      assert.notEqual(textOf(nameIdOf(other.targeted[0]!)), value, 'another SP, another value');
    });

    it('is never released to an SP that does not request it, nor without the userid-idp group', async () => {
      const silent = await signIn(SPS.silent.entityId);
      assert.deepEqual(
        silent.targeted.map((a) => a.getAttribute('Name')),
        [],
      );
      assert.ok(
        silent.attributes.some((a) => a.getAttribute('Name') === EPPN),
        'its groups are released',
      );
      const mailOnly = await signIn(SPS.mailOnly.entityId);
      assert.deepEqual(
        mailOnly.targeted.map((a) => a.getAttribute('Name')),
        [],
      );
      assert.deepEqual(
        mailOnly.attributes.map((a) => a.getAttribute('FriendlyName')),
        ['mail'],
      );
    });
  });
}
