// Inbound XML, strictly: bounded sizes, UTF-8 only, no DTD, entity, processing instruction or second
// root, and comments gone before anything reads a value. Everything the protocol features receive
// passes through here first.
import { DOMParser, XMLSerializer, type Document, type Element, type Node } from '@xmldom/xmldom';
import { inflateRawSync, deflateRawSync } from 'node:zlib';
import { refuse } from './errors.ts';

export type { Document, Element, Node } from '@xmldom/xmldom';

export interface SizeLimits {
  /** characters of base64 accepted (default 256 KiB, a large metadata-free protocol message) */
  maxEncodedLength?: number;
  /** bytes of XML accepted after decoding and, for the Redirect binding, inflating (default 256 KiB) */
  maxXmlBytes?: number;
}

export const DEFAULT_MAX_ENCODED = 256 * 1024;
export const DEFAULT_MAX_XML = 256 * 1024;

/** A document parsed by {@link parseXml}: the DOM (comments removed) and the text it came from. */
export interface ParsedXml {
  /** the text as received, the input of signature verification */
  xml: string;
  document: Document;
  root: Element;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Strict base64 (whitespace between lines allowed, as HTTP-POST senders wrap it), size-capped. */
export function decodeBase64(value: string, limits: SizeLimits = {}): Buffer {
  const maxEncoded = limits.maxEncodedLength ?? DEFAULT_MAX_ENCODED;
  if (value.length > maxEncoded) throw refuse('too-large', 'the message is too large');
  const compact = value.replace(/[\r\n\t ]+/g, '');
  if (compact.length === 0 || compact.length % 4 !== 0 || !BASE64.test(compact)) {
    throw refuse('bad-encoding', 'the message is not valid base64');
  }
  return Buffer.from(compact, 'base64');
}

/**
 * Raw DEFLATE (the HTTP-Redirect binding) with a cap on the output: zlib stops at `maxXmlBytes`
 * and throws, so a deflate bomb costs at most that much memory and the time to produce it.
 */
export function inflateRaw(compressed: Uint8Array, limits: SizeLimits = {}): Buffer {
  const max = limits.maxXmlBytes ?? DEFAULT_MAX_XML;
  try {
    return inflateRawSync(compressed, { maxOutputLength: max });
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw refuse('too-large', 'the message inflates beyond the size limit');
    }
    throw refuse('bad-encoding', 'the message is not valid DEFLATE data');
  }
}

/** The deflated, base64-encoded form of a message for the HTTP-Redirect binding. */
export function deflateForRedirect(xml: string): string {
  return deflateRawSync(Buffer.from(xml, 'utf8')).toString('base64');
}

/** A SAMLRequest/SAMLResponse value of the HTTP-POST binding (base64 of the XML), parsed. */
export function decodePostMessage(value: string, limits: SizeLimits = {}): ParsedXml {
  const bytes = decodeBase64(value, limits);
  return parseXml(bytes, limits);
}

/** A SAMLRequest/SAMLResponse value of the HTTP-Redirect binding (base64 of raw DEFLATE), parsed. */
export function decodeRedirectMessage(value: string, limits: SizeLimits = {}): ParsedXml {
  return parseXml(inflateRaw(decodeBase64(value, limits), limits), limits);
}

// Characters XML 1.0 allows (section 2.2); the decoder has already refused lone surrogates.
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const XML_DECLARATION =
  /^<\?xml\s+version\s*=\s*(["'])1\.0\1(?:\s+encoding\s*=\s*(["'])([A-Za-z0-9._-]+)\2)?(?:\s+standalone\s*=\s*(["'])(?:yes|no)\4)?\s*\?>/;

/** UTF-8 only: invalid sequences, other encodings declared, and characters XML forbids are refused. */
function decodeUtf8(input: string | Uint8Array, maxBytes: number): string {
  let text: string;
  if (typeof input === 'string') {
    if (Buffer.byteLength(input, 'utf8') > maxBytes) throw refuse('too-large', 'the message is too large');
    text = input;
  } else {
    if (input.byteLength > maxBytes) throw refuse('too-large', 'the message is too large');
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(input);
    } catch {
      throw refuse('bad-encoding', 'the message is not UTF-8');
    }
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (NOT_XML_CHAR.test(text)) throw refuse('bad-encoding', 'the message holds a character XML does not allow');
  if (/^<\?xml[\s?]/.test(text)) {
    const declaration = XML_DECLARATION.exec(text);
    if (!declaration) throw refuse('not-well-formed', 'the XML declaration is malformed');
    const encoding = declaration[3];
    if (encoding !== undefined && !/^utf-?8$/i.test(encoding)) {
      throw refuse('bad-encoding', 'only UTF-8 documents are accepted');
    }
  }
  return text;
}

/** Strict parsing: every parser error or warning is a refusal, and so is any DTD, even an empty one. */
export function parseXml(input: string | Uint8Array, limits: SizeLimits = {}): ParsedXml {
  const xml = decodeUtf8(input, limits.maxXmlBytes ?? DEFAULT_MAX_XML);
  // Refused before parsing, so an entity expansion attack never reaches a parser.
  if (/<!DOCTYPE|<!ENTITY|<!ELEMENT|<!ATTLIST|<!NOTATION/i.test(xml)) {
    throw refuse('forbidden-construct', 'a DTD is not allowed');
  }
  let document: Document;
  try {
    document = new DOMParser({
      onError: (level, message) => {
        throw new Error(`${level}: ${message}`);
      },
    }).parseFromString(xml, 'text/xml');
  } catch {
    throw refuse('not-well-formed', 'the message is not well-formed XML');
  }
  const root = checkDocument(document);
  removeComments(document);
  return { xml, document, root };
}

const ELEMENT = 1;
const TEXT = 3;
const CDATA = 4;
const PROCESSING_INSTRUCTION = 7;
const COMMENT = 8;
const DOCUMENT_TYPE = 10;

/** One root element; no processing instruction (the XML declaration aside), DTD or entity reference. */
function checkDocument(document: Document): Element {
  let root: Element | null = null;
  for (let child = document.firstChild; child; child = child.nextSibling) {
    if (child.nodeType === ELEMENT) {
      if (root) throw refuse('forbidden-construct', 'a second root element is not allowed');
      root = child as Element;
    } else if (child.nodeType === DOCUMENT_TYPE) {
      throw refuse('forbidden-construct', 'a DTD is not allowed');
    } else if (child.nodeType === PROCESSING_INSTRUCTION) {
      const isDeclaration = child === document.firstChild && child.nodeName === 'xml';
      if (!isDeclaration) throw refuse('forbidden-construct', 'processing instructions are not allowed');
    } else if (child.nodeType !== COMMENT && child.nodeType !== TEXT) {
      throw refuse('forbidden-construct', 'unexpected content outside the root element');
    }
  }
  if (!root) throw refuse('not-well-formed', 'the message has no root element');
  walk(root, (node) => {
    if (node.nodeType === PROCESSING_INSTRUCTION) {
      throw refuse('forbidden-construct', 'processing instructions are not allowed');
    }
    if (node.nodeType !== ELEMENT && node.nodeType !== TEXT && node.nodeType !== CDATA && node.nodeType !== COMMENT) {
      throw refuse('forbidden-construct', 'entity references are not allowed');
    }
  });
  return root;
}

function walk(node: Node, visit: (node: Node) => void): void {
  const stack: Node[] = [node];
  while (stack.length > 0) {
    const current = stack.pop()!;
    visit(current);
    for (let child = current.lastChild; child; child = child.previousSibling) stack.push(child);
  }
}

/**
 * Comments removed and the text around them joined: `admin@evil<!---->.com` reads as
 * `admin@evil.com` however it is read (firstChild, textContent, {@link textOf}), which is also what
 * a signature over it covers (comments are outside the canonical form of a same-document reference).
 */
function removeComments(document: Document): void {
  const comments: Node[] = [];
  walk(document, (node) => {
    if (node.nodeType === COMMENT) comments.push(node);
  });
  for (const comment of comments) comment.parentNode?.removeChild(comment);
  document.normalize();
}

/**
 * The text of an element that holds only text: the concatenation of its text and CDATA children.
 * An element with child elements is refused rather than read in part.
 */
export function textOf(element: Element): string {
  let text = '';
  for (let child = element.firstChild; child; child = child.nextSibling) {
    if (child.nodeType === TEXT || child.nodeType === CDATA) text += (child as unknown as { data: string }).data;
    else if (child.nodeType !== COMMENT) {
      throw refuse('forbidden-construct', 'an element that must hold text holds other content');
    }
  }
  return text;
}

/** The element children of a node, in document order. */
export function childElements(node: Node, namespace?: string, localName?: string): Element[] {
  const found: Element[] = [];
  for (let child = node.firstChild; child; child = child.nextSibling) {
    if (child.nodeType !== ELEMENT) continue;
    const element = child as Element;
    if (namespace !== undefined && element.namespaceURI !== namespace) continue;
    if (localName !== undefined && element.localName !== localName) continue;
    found.push(element);
  }
  return found;
}

/** Every element under (and including) a node, in document order. */
export function descendantElements(node: Node): Element[] {
  const found: Element[] = [];
  walk(node, (n) => {
    if (n.nodeType === ELEMENT) found.push(n as Element);
  });
  return found;
}

export function serialize(node: Node): string {
  // A carriage return in text (from a character reference, or a value the service put there) is
  // written as a reference: raw, it would parse back as a line feed and change what was signed.
  return new XMLSerializer().serializeToString(node).replace(/\r/g, '&#xD;');
}
