// Hand-made authenticator responses for the WebAuthn ceremonies (an attestation of format "none"
// and assertions), signed with test keys: what a browser would post, without a browser.
import { createHash, sign } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import { PUBLIC_URL, type TestCredential } from './helpers.ts';

const RP_ID = new URL(PUBLIC_URL).hostname;

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const rpHash = (rpId = RP_ID) => createHash('sha256').update(rpId).digest();
const clientData = (type: string, challenge: string, origin = PUBLIC_URL) =>
  Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));

export function assertion(
  key: TestCredential,
  challenge: string,
  counter: number,
  opts: { flags?: number; userHandle?: string; rpId?: string; origin?: string } = {},
) {
  const cd = clientData('webauthn.get', challenge, opts.origin);
  const authData = Buffer.concat([rpHash(opts.rpId), Buffer.from([opts.flags ?? 0x05]), u32(counter)]);
  const signature = sign('sha256', Buffer.concat([authData, createHash('sha256').update(cd).digest()]), key.privateKey);
  const id = key.id.toString('base64url');
  return {
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: cd.toString('base64url'),
      authenticatorData: authData.toString('base64url'),
      signature: signature.toString('base64url'),
      ...(opts.userHandle ? { userHandle: Buffer.from(opts.userHandle).toString('base64url') } : {}),
    },
  };
}

/** flags: UP 0x01, UV 0x04, BE 0x08, BS 0x10, AT 0x40 */
export function attestation(key: TestCredential, challenge: string, aaguid: string, flags = 0x45 | 0x08 | 0x10) {
  const cd = clientData('webauthn.create', challenge);
  const attested = Buffer.concat([
    Buffer.from(aaguid.replace(/-/g, ''), 'hex'),
    Buffer.from([key.id.length >> 8, key.id.length & 0xff]),
    key.id,
    key.cose,
  ]);
  const authData = Buffer.concat([rpHash(), Buffer.from([flags]), u32(0), attested]);
  const attestationObject = Buffer.from(
    isoCBOR.encode(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]) as any,
    ),
  );
  const id = key.id.toString('base64url');
  return {
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: cd.toString('base64url'),
      attestationObject: attestationObject.toString('base64url'),
      transports: ['internal', 'bogus'],
    },
  };
}
