// `ldap test`: reaches the directory as a sync would (TLS verified, the service account bound) and
// reads a few entries the way the sync reads them, changing nothing.
import type { Entry } from 'ldapts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { findOrganization } from '../store/directory.ts';
import { AppError } from '../errors.ts';
import { directorySettings, loadLdapDirectory } from '../directory/ldap-directories.ts';
import {
  close,
  describeLdapError,
  readEntry,
  requestedAttributes,
  serviceConnection,
  userFilter,
  type Mapping,
} from '../directory/ldap-client.ts';

export interface ProbeResult {
  id: number;
  url: string;
  transport: 'ldaps' | 'starttls' | 'plain';
  bound: true;
  active_directory: boolean;
  /** up to five entries as the sync reads them */
  sample: { dn: string; eppn?: string; external_id?: string; disabled?: boolean; error?: string }[];
}

export async function probeLdapDirectory(store: Store, keys: Keyring, id: number): Promise<ProbeResult> {
  const d = await loadLdapDirectory(store, id);
  const org = await findOrganization(store.db, Number(d.org_id));
  const settings = directorySettings(keys, d);
  let client;
  try {
    client = await serviceConnection(settings);
  } catch (err) {
    throw new AppError(502, `LDAP directory ${id}: ${describeLdapError(err)}`);
  }
  try {
    const root = await client.search('', { scope: 'base', attributes: ['highestCommittedUSN'] });
    let searchEntries: Entry[] = [];
    // the first page of five: a size limit would make the server refuse a directory of more
    for await (const page of client.searchPaginated(settings.baseDn, {
      scope: 'sub',
      filter: userFilter(settings.filter),
      attributes: requestedAttributes(settings.mapping),
      explicitBufferAttributes: ['objectGUID'],
      paged: { pageSize: 5 },
    })) {
      searchEntries = page.searchEntries.slice(0, 5);
      break;
    }
    const sample = searchEntries.map((entry) => {
      const r = readEntry(entry, JSON.parse(d.mapping) as Mapping, org?.realm ?? '');
      return typeof r === 'string'
        ? { dn: entry.dn, error: r }
        : { dn: r.dn, eppn: r.eppn, external_id: r.externalId, disabled: r.disabled };
    });
    return {
      id,
      url: d.url,
      transport: d.url.startsWith('ldaps:') ? 'ldaps' : d.starttls === 1 ? 'starttls' : 'plain',
      bound: true,
      active_directory: root.searchEntries[0]?.highestCommittedUSN !== undefined,
      sample,
    };
  } catch (err) {
    throw new AppError(502, `LDAP directory ${id}: ${describeLdapError(err)}`);
  } finally {
    await close(client);
  }
}
