// SAML responses on /metrics: by outcome (success, a status, or refused with the error page) and
// by the binding the request came over (or unsolicited). Both label sets are fixed in code.
import { Counter } from 'prom-client';
import { metrics } from '../http/metrics.ts';

export type Outcome =
  | 'success'
  | 'refused'
  | 'no_passive'
  | 'no_authn_context'
  | 'request_denied'
  | 'invalid_nameid_policy'
  | 'logout'
  | 'partial_logout'
  | 'logout_propagated'
  | 'logout_not_propagated';

const responses = new Counter({
  name: 'idp_saml_responses_total',
  help: 'SAML single sign-on and logout answers, by outcome and by the binding the request came over',
  labelNames: ['outcome', 'binding'],
  registers: [metrics],
});

export function countResponse(outcome: Outcome, binding: 'redirect' | 'post' | 'unsolicited'): void {
  responses.inc({ outcome, binding });
}
