// Strict parsing of inbound XML: sizes, encodings, DTDs, processing instructions, roots, comments.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { deflateRawSync } from 'node:zlib';
import {
  decodePostMessage,
  decodeRedirectMessage,
  inflateRaw,
  parseXml,
  textOf,
  XmlSecurityError,
  type XmlRefusal,
} from '../../src/saml/xml/index.ts';
import { ASSERTION, assertion, authnRequest } from './saml-fixtures.ts';

function refused(reason: XmlRefusal, run: () => unknown): void {
  assert.throws(run, (err: unknown) => {
    assert.ok(err instanceof XmlSecurityError, `expected XmlSecurityError, got ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    assert.equal(err.status, 400);
    return true;
  });
}

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');

describe('parseXml: what it accepts', () => {
  it('parses a SAML request, with or without a UTF-8 declaration and BOM', () => {
    for (const text of [
      authnRequest(),
      `<?xml version="1.0" encoding="UTF-8"?>\n${authnRequest()}`,
      `\uFEFF<?xml version="1.0"?>${authnRequest()}`,
    ]) {
      const parsed = parseXml(Buffer.from(text, 'utf8'));
      assert.equal(parsed.root.localName, 'AuthnRequest');
      assert.equal(parsed.root.getAttribute('ID'), '_req1');
    }
  });
});

describe('parseXml: DTDs and entities', () => {
  it('refuses billion laughs before parsing it', () => {
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
      Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i === 0 ? '' : i};`.repeat(10)}">`).join('') +
      ']><lolz>&lol9;</lolz>';
    refused('forbidden-construct', () => parseXml(laughs));
  });

  it('refuses XXE (an external entity)', () => {
    const xxe = `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>`;
    refused('forbidden-construct', () => parseXml(xxe));
  });

  it('refuses any DOCTYPE, even without entities, and in any case spelling', () => {
    refused('forbidden-construct', () => parseXml(`<!DOCTYPE AuthnRequest>${authnRequest()}`));
    refused('forbidden-construct', () => parseXml(`<!doctype AuthnRequest>${authnRequest()}`));
  });

  it('refuses a reference to an undeclared entity', () => {
    refused('not-well-formed', () => parseXml('<r>&undeclared;</r>'));
  });
});

describe('parseXml: structure', () => {
  it('refuses processing instructions, inside or outside the root', () => {
    refused('forbidden-construct', () => parseXml(`<?xml-stylesheet href="x.xsl"?>${authnRequest()}`));
    refused('forbidden-construct', () => parseXml(authnRequest().replace('<saml:Issuer>', '<?evil x?><saml:Issuer>')));
    refused('forbidden-construct', () => parseXml(`${authnRequest()}<?evil x?>`));
  });

  it('refuses a second root element', () => {
    refused('not-well-formed', () => parseXml(authnRequest() + authnRequest('_req2')));
  });

  it('refuses malformed XML and an undeclared prefix', () => {
    refused('not-well-formed', () => parseXml('<a><b></a>'));
    refused('not-well-formed', () => parseXml('<p:a/>'));
    refused('not-well-formed', () => parseXml('<a x="1" x="2"/>'));
  });
});

describe('parseXml: encodings', () => {
  it('refuses invalid UTF-8, UTF-16 and other declared encodings', () => {
    refused('bad-encoding', () =>
      parseXml(Buffer.concat([Buffer.from('<a>'), Buffer.from([0xc3, 0x28]), Buffer.from('</a>')])),
    );
    refused('bad-encoding', () => parseXml(Buffer.from(`\uFEFF${authnRequest()}`, 'utf16le')));
    refused('bad-encoding', () => parseXml(`<?xml version="1.0" encoding="ISO-8859-1"?>${authnRequest()}`));
    refused('bad-encoding', () => parseXml(`<?xml version="1.0" encoding="UTF-16"?>${authnRequest()}`));
  });

  it('refuses characters XML does not allow (NUL, control characters)', () => {
    refused('bad-encoding', () => parseXml('<a>x\u0000y</a>'));
    refused('bad-encoding', () => parseXml('<a>x\u0001y</a>'));
  });
});

describe('parseXml: comments never change a value', () => {
  const signedShape = assertion('_a', 'admin@evil<!---->.com');

  it('reads admin@evil<!---->.com as admin@evil.com however it is read', () => {
    const parsed = parseXml(signedShape);
    const nameId = parsed.document.getElementsByTagNameNS(ASSERTION, 'NameID')[0]!;
    assert.equal(textOf(nameId), 'admin@evil.com');
    assert.equal(nameId.textContent, 'admin@evil.com');
    assert.equal(nameId.firstChild!.nodeValue, 'admin@evil.com');
    assert.equal(nameId.childNodes.length, 1);
  });

  it('reads a value split by several comments and CDATA as one', () => {
    const parsed = parseXml(`<a>ad<!--x-->min<![CDATA[@evil]]><!---->.com</a>`);
    assert.equal(textOf(parsed.root), 'admin@evil.com');
  });

  it('textOf refuses an element with child elements instead of reading part of it', () => {
    const parsed = parseXml('<a>admin<b/>@evil.com</a>');
    refused('forbidden-construct', () => textOf(parsed.root));
  });
});

describe('size caps and the bindings', () => {
  it('decodes the HTTP-POST and HTTP-Redirect bindings', () => {
    assert.equal(decodePostMessage(b64(authnRequest())).root.localName, 'AuthnRequest');
    const wrapped = b64(authnRequest()).replace(/(.{76})/g, '$1\r\n');
    assert.equal(decodePostMessage(wrapped).root.localName, 'AuthnRequest');
    assert.equal(decodeRedirectMessage(b64(deflateRawSync(authnRequest()))).root.localName, 'AuthnRequest');
  });

  it('refuses base64 over its cap before decoding, and XML over its cap', () => {
    const big = authnRequest().replace('</samlp:AuthnRequest>', `<!--${'x'.repeat(300_000)}--></samlp:AuthnRequest>`);
    refused('too-large', () => decodePostMessage(b64(big)));
    refused('too-large', () => decodePostMessage(b64(authnRequest()), { maxEncodedLength: 100 }));
    refused('too-large', () => decodePostMessage(b64(authnRequest()), { maxXmlBytes: 100 }));
    refused('too-large', () => parseXml(big));
  });

  it('refuses invalid base64 and invalid DEFLATE data', () => {
    refused('bad-encoding', () => decodePostMessage('not base64!'));
    refused('bad-encoding', () => decodePostMessage('QUJD=A=='));
    refused('bad-encoding', () => decodeRedirectMessage(b64('not deflate at all')));
  });

  it('refuses a deflate bomb quickly, without inflating it whole', () => {
    // 64 MiB of zeros deflates to about 64 KiB (whose base64 passes the 256 KiB cap on it); the
    // cap on inflated XML is 256 KiB.
    const bomb = deflateRawSync(Buffer.alloc(64 * 1024 * 1024));
    assert.ok(bomb.length < 128 * 1024);
    const before = process.memoryUsage();
    const started = performance.now();
    refused('too-large', () => inflateRaw(bomb));
    const elapsed = performance.now() - started;
    const grown = process.memoryUsage().arrayBuffers - before.arrayBuffers;
    assert.ok(elapsed < 500, `took ${elapsed} ms`);
    assert.ok(grown < 16 * 1024 * 1024, `array buffers grew by ${grown} bytes`);
    // And through the binding, where the base64 is within its cap: stopped by the inflated-size cap.
    assert.ok(b64(bomb).length < 256 * 1024);
    refused('too-large', () => decodeRedirectMessage(b64(bomb)));
    // With a smaller cap on the inflated size, refused at that size.
    refused('too-large', () => decodeRedirectMessage(b64(deflateRawSync(Buffer.alloc(4096))), { maxXmlBytes: 1024 }));
  });
});
