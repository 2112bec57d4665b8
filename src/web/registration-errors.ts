// What a user is told when a passkey could not be registered: the organization's policy and the
// authenticator metadata each have their own message; anything else is the page's own retry text.
import type { Failure } from '../webauthn/ceremonies.ts';
import type { MessageKey } from '../ui/i18n.ts';

const MESSAGES: Partial<Record<Failure, MessageKey>> = {
  already_registered: 'account.already_registered',
  policy_authenticator: 'account.policy_authenticator',
  policy_device_bound: 'account.policy_device_bound',
  policy_user_verification: 'account.policy_user_verification',
  authenticator_compromised: 'account.authenticator_compromised',
};

export function registrationError(reason: Failure, fallback: MessageKey): MessageKey {
  return MESSAGES[reason] ?? fallback;
}
