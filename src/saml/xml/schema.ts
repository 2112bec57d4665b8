// The schema gate: SAML protocol messages and metadata validated against the OASIS SAML 2.0 schemas
// (and the XML Signature, XML Encryption and metadata extension schemas they use) by libxml2, through
// libxml2-wasm (WebAssembly, no native addon, no install script). The schemas are compiled once per
// process, on first use, and kept; each validation then parses the message with libxml2 and checks it
// synchronously. The schema files are in ./schemas (README.md there says where they come from).
import { existsSync, readFileSync } from 'node:fs';
import { refuse } from './errors.ts';
import type { ParsedXml } from './parse.ts';

/** What is validated: a protocol message (requests, responses, assertions) or metadata. */
export type SchemaKind = 'protocol' | 'metadata';

// Beside this file when run from the sources; in the bundle this code sits in a chunk of dist/src/,
// and the build copies the schemas to dist/src/saml/xml/schemas/.
const SCHEMA_DIR =
  [new URL('./schemas/', import.meta.url), new URL('./saml/xml/schemas/', import.meta.url)].find((dir) =>
    existsSync(new URL('saml-schema-protocol-2.0.xsd', dir)),
  ) ?? new URL('./schemas/', import.meta.url);
/** The base URL libxml2 resolves schemaLocation against; served from memory, never from disk or network. */
const BASE = 'saml-xml-schemas:/';

const FILES = [
  'saml-schema-protocol-2.0.xsd',
  'saml-schema-assertion-2.0.xsd',
  'saml-schema-metadata-2.0.xsd',
  'xmldsig-core-schema.xsd',
  'xenc-schema.xsd',
  'xml.xsd',
  'sstc-saml-metadata-ui-v1.0.xsd',
  'sstc-metadata-attr.xsd',
  'saml-metadata-rpi-v1.0.xsd',
  'sstc-saml-metadata-algsupport-v1.0.xsd',
  'shibboleth-metadata-1.0.xsd',
];

/** One schema per kind, importing every namespace that kind may carry (extensions are validated when known). */
const DRIVERS: Record<SchemaKind, Array<[string, string]>> = {
  protocol: [['urn:oasis:names:tc:SAML:2.0:protocol', 'saml-schema-protocol-2.0.xsd']],
  metadata: [
    ['urn:oasis:names:tc:SAML:2.0:metadata', 'saml-schema-metadata-2.0.xsd'],
    ['urn:oasis:names:tc:SAML:metadata:ui', 'sstc-saml-metadata-ui-v1.0.xsd'],
    ['urn:oasis:names:tc:SAML:metadata:attribute', 'sstc-metadata-attr.xsd'],
    ['urn:oasis:names:tc:SAML:metadata:rpi', 'saml-metadata-rpi-v1.0.xsd'],
    ['urn:oasis:names:tc:SAML:metadata:algsupport', 'sstc-saml-metadata-algsupport-v1.0.xsd'],
    ['urn:mace:shibboleth:metadata:1.0', 'shibboleth-metadata-1.0.xsd'],
  ],
};

function driverSchema(kind: SchemaKind): string {
  const imports = DRIVERS[kind].map(([ns, file]) => `<xs:import namespace="${ns}" schemaLocation="${file}"/>`).join('');
  return `<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="urn:x-saml-xml:${kind}">${imports}</xs:schema>`;
}

type Libxml2 = typeof import('libxml2-wasm');
type Validator = import('libxml2-wasm').XsdValidator;

let loading: Promise<{ lib: Libxml2; validators: Partial<Record<SchemaKind, Validator>> }> | undefined;

/** libxml2-wasm loaded on first use (it instantiates WebAssembly), with the schema files in memory. */
function loadLibrary() {
  loading ??= (async () => {
    const lib = await import('libxml2-wasm');
    const buffers: Record<string, Uint8Array> = {};
    for (const file of FILES) buffers[BASE + file] = readFileSync(new URL(file, SCHEMA_DIR));
    lib.xmlRegisterInputProvider(new lib.XmlBufferInputProvider(buffers));
    return { lib, validators: {} };
  })();
  return loading;
}

async function validatorFor(kind: SchemaKind): Promise<{ lib: Libxml2; validator: Validator }> {
  const loaded = await loadLibrary();
  let validator = loaded.validators[kind];
  if (!validator) {
    const schemaDoc = loaded.lib.XmlDocument.fromString(driverSchema(kind), { url: `${BASE}driver-${kind}.xsd` });
    try {
      validator = loaded.lib.XsdValidator.fromDoc(schemaDoc);
    } finally {
      schemaDoc.dispose();
    }
    loaded.validators[kind] = validator;
  }
  return { lib: loaded.lib, validator };
}

/** Compile the schemas now (at start-up, say) instead of on the first message. */
export async function prepareSchemas(kinds: SchemaKind[] = ['protocol', 'metadata']): Promise<void> {
  for (const kind of kinds) await validatorFor(kind);
}

/**
 * Refuse a message that is not valid against the schema of its kind. The text validated is the one
 * {@link parseXml} accepted (no DTD, no entities); libxml2 parses it without network or file access.
 */
export async function validateSchema(parsed: ParsedXml, kind: SchemaKind): Promise<void> {
  const { lib, validator } = await validatorFor(kind);
  let doc: import('libxml2-wasm').XmlDocument;
  try {
    doc = lib.XmlDocument.fromString(parsed.xml, { option: lib.ParseOption.XML_PARSE_NONET });
  } catch {
    throw refuse('not-well-formed', 'the message is not well-formed XML');
  }
  try {
    validator.validate(doc);
  } catch (err) {
    const details = (err as { details?: Array<{ message: string }> }).details ?? [];
    const detail = details.map((d) => d.message.trim()).join('; ');
    throw refuse('schema-invalid', 'the message is not valid against the SAML schema', detail.slice(0, 1000));
  } finally {
    doc.dispose();
  }
}
