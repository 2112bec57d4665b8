// Namespaces of user ids (`<namespace>:<identifier>`). The directory's own ids come from the user
// record (`<IDP_NAMESPACE>:<eppn>`, `nin:<number>`); secondary ids live in user_ids under one of
// the namespaces below, each released by one attribute group. One table for every feature that
// reads or writes such ids.
import type { AttributeGroup } from '../clients/index.ts';

export const NIN_NAMESPACE = 'nin';

export const SECONDARY_NAMESPACES: Readonly<Record<string, AttributeGroup>> = {
  edugain: 'userid-edugain',
  eidas: 'eidas',
  apple: 'userid-social',
  facebook: 'userid-social',
  github: 'userid-social',
  google: 'userid-social',
  linkedin: 'userid-social',
  microsoft: 'userid-social',
  twitter: 'userid-social',
  windowslive: 'userid-social',
};

/** Names IDP_NAMESPACE may not take: they already mean something else. */
export const RESERVED_NAMESPACES = [NIN_NAMESPACE, 'p', ...Object.keys(SECONDARY_NAMESPACES)];
