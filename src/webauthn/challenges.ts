// The server side of WebAuthn challenges: single-use, expiring, and bound to what asked for them
// (an interaction or a signed-in session, in one browser). RP ID and origin derive from PUBLIC_URL.
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { insertChallenge, takeChallenge } from '../store/challenges.ts';
import { isB64url } from './formats.ts';

export const CHALLENGE_TTL_MS = 10 * 60 * 1000;
export const CEREMONY_TIMEOUT_MS = 5 * 60 * 1000;

export interface ChallengeRecord {
  purpose: 'register' | 'authenticate';
  binding: string;
  userId?: number;
}

export interface Challenges {
  remember(challenge: string, record: ChallengeRecord): Promise<void>;
  /** Consumes the challenge named in clientDataJSON; it must have been issued for this purpose and binding. */
  claim(
    clientDataJSON: string,
    purpose: ChallengeRecord['purpose'],
    binding: string,
  ): Promise<{ challenge: string; record: ChallengeRecord } | undefined>;
}

/** What every ceremony step needs: who we are to the browser, the store, the clock, the challenges. */
export interface Ceremony {
  rpId: string;
  origin: string;
  /** origin and the related origins (WEBAUTHN_RELATED_ORIGINS) a ceremony may come from */
  origins: string[];
  hints: Config['webauthnHints'];
  /** authenticator names and icons of AAGUID_DATA_FILE */
  aaguidData: Config['aaguidData'];
  store: Store;
  now: () => number;
  challenges: Challenges;
}

/** The challenge the browser signed over, read from clientDataJSON (verified again later). */
function challengeOf(clientDataJSON: string): string | undefined {
  try {
    const data = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    return isB64url(data.challenge, 200) && data.challenge.length >= 16 ? data.challenge : undefined;
  } catch {
    return undefined;
  }
}

export function createChallenges(store: Store, now: () => number): Challenges {
  return {
    async remember(challenge, record) {
      await insertChallenge(store.db, challenge, JSON.stringify(record), now() + CHALLENGE_TTL_MS);
    },
    async claim(clientDataJSON, purpose, binding) {
      const challenge = challengeOf(clientDataJSON);
      if (!challenge) return undefined;
      const stored = await takeChallenge(store.db, challenge, now());
      if (!stored) return undefined;
      const record = JSON.parse(stored) as ChallengeRecord;
      if (record.purpose !== purpose || record.binding !== binding) return undefined;
      return { challenge, record };
    },
  };
}

export function createCeremony(config: Config, store: Store, now: () => number): Ceremony {
  return {
    rpId: new URL(config.publicUrl).hostname,
    origin: config.publicUrl,
    origins: [config.publicUrl, ...config.webauthnRelatedOrigins.filter((o) => o !== config.publicUrl)],
    hints: config.webauthnHints,
    aaguidData: config.aaguidData,
    store,
    now,
    challenges: createChallenges(store, now),
  };
}
