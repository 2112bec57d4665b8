// Authenticator names and icons a deployment gives in the community passkey-authenticator-aaguids
// format (AAGUID_DATA_FILE), read and checked once at start-up with the rest of the configuration.
import { readFileSync } from 'node:fs';

const AAGUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** as long as a passkey label may be */
const MAX_NAME = 100;

export interface AuthenticatorInfo {
  name: string;
  /** data: URIs (SVG, PNG or WebP) for light and dark page schemes */
  iconLight?: string;
  iconDark?: string;
}

export type AaguidData = Map<string, AuthenticatorInfo>;

const ICON = /^data:image\/(svg\+xml|png|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const MAX_FILE = 20 * 1024 * 1024;

/**
 * Reads a list in the passkey-authenticator-aaguids format ({"<aaguid>": {"name", "icon_light",
 * "icon_dark"}}); throws an Error naming the first bad entry.
 */
export function readAaguidData(path: string): AaguidData {
  const text = readFileSync(path, 'utf8');
  if (text.length > MAX_FILE) throw new Error('is larger than 20 MiB');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error('is not JSON');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('is not a JSON object');
  const data: AaguidData = new Map();
  for (const [key, value] of Object.entries(parsed)) {
    const aaguid = key.toLowerCase();
    const entry = value as { name?: unknown; icon_light?: unknown; icon_dark?: unknown } | null;
    if (!AAGUID.test(aaguid)) throw new Error(`has a key that is not an AAGUID: ${key.slice(0, 60)}`);
    if (!entry || typeof entry.name !== 'string' || !entry.name.trim()) throw new Error(`${key}: name is missing`);
    const icon = (v: unknown, which: string) => {
      if (v === undefined) return undefined;
      if (typeof v !== 'string' || !ICON.test(v)) throw new Error(`${key}: ${which} is not a base64 image data: URI`);
      return v;
    };
    const iconLight = icon(entry.icon_light, 'icon_light');
    const iconDark = icon(entry.icon_dark, 'icon_dark');
    data.set(aaguid, { name: entry.name.trim().slice(0, MAX_NAME), iconLight, iconDark });
  }
  return data;
}
