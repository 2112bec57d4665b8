// Parsing the identifiers a user-existence check names. Everything here depends on the request
// alone, never on the directory, so a 400 says nothing about who exists.
import { badRequest } from '../errors.ts';
import { eppnProblem, normalizeEmail } from '../directory/index.ts';

/** What to look for, and where the organization to check comes from. */
export type Lookup =
  | { kind: 'eppn'; realm: string; eppn: string }
  | { kind: 'mail'; realm: string; mail: string }
  | { kind: 'nin'; nin: string }
  | { kind: 'secondary'; namespace: string; identifier: string };

export const MAX_EPPN = 320;
export const MAX_USERID_SEC = 400;
export const MAX_MAIL = 320;

import { NIN_NAMESPACE, SECONDARY_NAMESPACES as NAMESPACES } from '../vocabulary.ts';

/** Namespaces held in user_ids and searchable by the exists endpoint (besides the IdP namespace and nin). */
export const SECONDARY_NAMESPACES = Object.keys(NAMESPACES);
export { NIN_NAMESPACE };

// C0, DEL, C1 and the Unicode line/paragraph separators: never part of an identifier, and they
// would let a caller forge lines in logs.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const NAMESPACE_SYNTAX = /^[a-z][a-z0-9_-]{0,31}$/;
const NIN = /^\d{11}$/;

export function knownNamespaces(idpNamespace: string): string[] {
  return [idpNamespace, NIN_NAMESPACE, ...SECONDARY_NAMESPACES];
}

function present(raw: string | undefined, missing: string): string {
  if (raw === undefined || raw === '') throw badRequest(missing);
  if (CONTROL.test(raw)) throw badRequest('Identifier must not contain control characters');
  return raw;
}

/** username@domain (an eduPersonPrincipalName), compared in lower case like everywhere else. */
export function parseEppn(raw: string | undefined): Lookup & { kind: 'eppn' } {
  const value = present(raw, 'Missing identifier: expected username@domain');
  if (value.length > MAX_EPPN) throw badRequest(`Identifier is too long (at most ${MAX_EPPN} characters)`);
  const at = value.lastIndexOf('@');
  if (at < 0) throw badRequest("Identifier must have the form username@domain (no '@' found)");
  if (at === 0) throw badRequest('Identifier has an empty username part');
  if (at === value.length - 1) throw badRequest('Identifier has an empty domain part');
  const eppn = value.toLowerCase();
  const problem = eppnProblem(eppn);
  if (problem)
    throw badRequest(
      `Identifier ${problem === 'has an invalid realm' ? 'has an invalid domain part' : problem.replace('user part', 'username part')}`,
    );
  return { kind: 'eppn', eppn, realm: eppn.slice(at + 1) };
}

/** <namespace>:<identifier>, as in the userid_sec claim. */
export function parseUseridSec(raw: string | undefined, idpNamespace: string): Lookup {
  const value = present(raw, 'Missing identifier: expected <namespace>:<identifier>');
  if (value.length > MAX_USERID_SEC) throw badRequest(`Identifier is too long (at most ${MAX_USERID_SEC} characters)`);
  const colon = value.indexOf(':');
  if (colon < 0) throw badRequest("Identifier must have the form <namespace>:<identifier> (no ':' found)");
  const namespace = value.slice(0, colon).toLowerCase();
  const identifier = value.slice(colon + 1);
  const known = knownNamespaces(idpNamespace);
  if (!known.includes(namespace)) {
    const named = NAMESPACE_SYNTAX.test(namespace) ? ` '${namespace}'` : '';
    throw badRequest(`Unknown namespace${named} (known: ${known.join(', ')})`);
  }
  if (identifier === '') throw badRequest(`Identifier has an empty value after '${namespace}:'`);
  if (namespace === idpNamespace) return parseEppn(identifier);
  if (namespace === NIN_NAMESPACE) {
    if (!NIN.test(identifier)) throw badRequest('A nin identifier must be 11 digits');
    return { kind: 'nin', nin: identifier };
  }
  return { kind: 'secondary', namespace, identifier };
}

/** A realm (the domain part of eppns) and a mail address to look for among its users. */
export function parseMailLookup(realmRaw: string | undefined, mailRaw: string | undefined): Lookup & { kind: 'mail' } {
  const realmValue = present(realmRaw, 'Missing realm');
  const realm = realmValue.toLowerCase();
  // the same rule as the realm of an eppn
  if (realm.length > 253 || eppnProblem(`x@${realm}`)) throw badRequest('Invalid realm');
  const mail = present(mailRaw, 'Missing mail address');
  if (mail.length > MAX_MAIL) throw badRequest(`Mail address is too long (at most ${MAX_MAIL} characters)`);
  if (/\s/.test(mail)) throw badRequest('Mail address must not contain whitespace');
  const at = mail.lastIndexOf('@');
  if (at < 0) throw badRequest("Mail address must contain '@'");
  if (at === 0) throw badRequest('Mail address has an empty local part');
  if (at === mail.length - 1) throw badRequest('Mail address has an empty domain part');
  return { kind: 'mail', realm, mail: normalizeEmail(mail) };
}
