// amr and acr for each kind of sign-in, and which requests a password cannot satisfy.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ACR_BASELINE,
  acrFor,
  amrForPasskey,
  passwordSatisfies,
  requestedAcrs,
} from '../../src/oauth/authentication-context.ts';

describe('authentication context', () => {
  it('amr per RFC 8176: device-bound hwk, synced swk, user (presence) always, mfa only with user verification', () => {
    assert.deepEqual(amrForPasskey({ userVerified: true, backupEligible: false }), ['hwk', 'user', 'mfa']);
    assert.deepEqual(amrForPasskey({ userVerified: true, backupEligible: true }), ['swk', 'user', 'mfa']);
    assert.deepEqual(amrForPasskey({ userVerified: false, backupEligible: false }), ['hwk', 'user']);
    assert.deepEqual(amrForPasskey({ userVerified: false, backupEligible: true }), ['swk', 'user']);
  });

  it('acr: every passkey is phishing-resistant, a password only the baseline', () => {
    assert.equal(acrFor(['hwk']), 'phr');
    assert.equal(acrFor(['swk', 'user', 'mfa']), 'phr');
    assert.equal(acrFor(['pwd']), ACR_BASELINE);
  });

  it('reads acr_values and the claims parameter; unknown values are ignored', () => {
    assert.deepEqual(requestedAcrs({ acr_values: 'phr urn:other' }), ['phr']);
    assert.deepEqual(requestedAcrs({ claims: '{"id_token":{"acr":{"essential":true,"value":"phr"}}}' }), ['phr']);
    assert.deepEqual(requestedAcrs({ claims: '{"id_token":{"acr":{"values":["phr"]}}}' }), ['phr']);
    assert.deepEqual(requestedAcrs({ claims: 'not json' }), []);
    assert.deepEqual(requestedAcrs({ acr_values: 'urn:other' }), []);
  });

  it('a password satisfies a request without our classes or naming the baseline, not one asking for phr only', () => {
    assert.equal(passwordSatisfies({}), true);
    assert.equal(passwordSatisfies({ acr_values: 'urn:other' }), true);
    assert.equal(passwordSatisfies({ acr_values: `phr ${ACR_BASELINE}` }), true);
    assert.equal(passwordSatisfies({ acr_values: 'phr' }), false);
    assert.equal(passwordSatisfies({ claims: '{"id_token":{"acr":{"essential":true,"values":["phr"]}}}' }), false);
  });
});
