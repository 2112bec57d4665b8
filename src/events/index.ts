// Events: the Shared Signals transmitter's routes, and the job that delivers the outbox to
// webhooks, push streams and (through SMTP_URL) e-mail (every instance runs one; see delivery.ts).
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { TokenVerifier } from '../http/bearer.ts';
import type { KeyManager } from '../oauth/key-manager.ts';
import type { Store } from '../store/index.ts';
import { startEventDelivery } from './delivery.ts';
import { setSigner } from './sets.ts';
import { ssfRoutes } from './ssf.ts';
import { targetPolicy } from './targets.ts';
import { observeOutbox } from '../http/metrics-events.ts';
import { createMailer } from './mail.ts';

export interface EventsOptions {
  config: Config;
  store: Store;
  keys: Keyring;
  verifier: TokenVerifier;
  keyManager: KeyManager;
  now: () => number;
}

export function eventsPlugin(o: EventsOptions) {
  const policy = targetPolicy(o.config);
  const signSet = setSigner(o.config.publicUrl, o.keyManager);
  return async function events(app: FastifyInstance) {
    observeOutbox(app, o.store);
    await app.register(ssfRoutes({ ...o, policy, signSet }));
    const mailer = createMailer(o.config);
    const job = startEventDelivery({
      store: o.store,
      keys: o.keys,
      policy,
      issuer: o.config.publicUrl,
      signSet,
      retryBaseMs: o.config.eventsRetryBaseMs,
      deadLetterMs: o.config.eventsDeadLetterSeconds * 1000,
      mail: { store: o.store, keys: o.keys, publicUrl: o.config.publicUrl, brand: o.config.brand, mailer },
      log: app.log,
      now: o.now,
    });
    app.addHook('onClose', async () => {
      await job.stop();
      mailer?.close();
    });
  };
}
