// Security Event Tokens (RFC 8417) for OpenID Shared Signals streams: signed with the service's
// ES256 key (the one its JWKS publishes), `typ` secevent+jwt, the subject as `sub_id` (RFC 9493),
// one event per token.
import { importJWK, SignJWT, type JWK } from 'jose';
import type { KeyManager } from '../oauth/key-manager.ts';
import { SSF_TYPE_OF, type EventData, type EventType } from '../audit/events.ts';

export const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';

const INITIATOR: Record<string, string> = {
  user: 'user',
  operator: 'admin',
  client: 'admin',
  provisioning: 'policy',
  system: 'system',
};

/** The payload of each event type's SSF event (its type URI is SSF_TYPE_OF's). */
function payloadOf(type: EventType, common: object, data: EventData): object {
  switch (type) {
    case 'passkey.created':
    case 'passkey.deleted':
      return {
        ...common,
        credential_type: 'fido2-platform',
        change_type: type === 'passkey.created' ? 'create' : 'delete',
      };
    case 'password.changed':
      return { ...common, credential_type: 'password', change_type: data.change ?? 'update' };
    case 'session.revoked':
      return common;
    default:
      // RISC account-disabled, account-enabled, account-purged carry no more than the subject
      return {};
  }
}

/** The SSF event (type and payload) an outbox event is sent as; undefined when it has none. */
export function ssfEvent(type: string, at: number, data: EventData): { uri: string; payload: object } | undefined {
  const uri = SSF_TYPE_OF[type as EventType];
  if (!uri) return undefined;
  const common = {
    event_timestamp: Math.floor(at / 1000),
    initiating_entity: INITIATOR[data.actor.type] ?? 'system',
  };
  return { uri, payload: payloadOf(type as EventType, common, data) };
}

export interface SetContent {
  jti: string;
  audience: string;
  subject: object;
  uri: string;
  payload: object;
  txn?: string;
}

/** Signs SETs with the active ES256 key of the key manager. */
export function setSigner(issuer: string, keyManager: KeyManager) {
  const imported = new Map<string, CryptoKey | Uint8Array>();
  return async function sign(content: SetContent, now: number): Promise<string> {
    const keys = keyManager.current();
    const kid = keys.active.ES256;
    const jwk: JWK | undefined = keys.providerJwks.find((k) => k.kid === kid);
    if (!jwk) throw new Error('no active ES256 signing key');
    let key = imported.get(kid);
    if (!key) {
      key = await importJWK(jwk, 'ES256');
      imported.clear();
      imported.set(kid, key);
    }
    return new SignJWT({
      sub_id: content.subject,
      events: { [content.uri]: content.payload },
      ...(content.txn ? { txn: content.txn } : {}),
    })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'secevent+jwt' })
      .setIssuer(issuer)
      .setAudience(content.audience)
      .setJti(content.jti)
      .setIssuedAt(Math.floor(now / 1000))
      .sign(key);
  };
}
export type SetSigner = ReturnType<typeof setSigner>;

/**
 * The SET of one delivery to a stream, pushed or polled: its jti and txn stay the same across
 * attempts (`set-<delivery id>`, `evt-<event id>`). Undefined for an event no SET is sent for.
 */
export async function setForDelivery(
  sign: SetSigner,
  issuer: string,
  stream: { id: string; client_id: string },
  d: { id: number; event_id: number; type: string; at: number; data: string },
  now: number,
): Promise<{ jti: string; token: string } | undefined> {
  const data = JSON.parse(d.data) as EventData & { state?: string };
  const verification = d.type === 'ssf.verification';
  const event = verification
    ? { uri: VERIFICATION, payload: data.state === undefined ? {} : { state: data.state } }
    : ssfEvent(d.type, Number(d.at), data);
  if (!event) return undefined;
  const subject = verification
    ? { format: 'opaque', id: stream.id }
    : { format: 'iss_sub', iss: issuer, sub: data.sub ?? data.eppn };
  const jti = `set-${d.id}`;
  const token = await sign({ jti, audience: stream.client_id, subject, txn: `evt-${d.event_id}`, ...event }, now);
  return { jti, token };
}
