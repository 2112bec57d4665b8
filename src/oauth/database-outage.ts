// oidc-provider answers a failure of its storage like any unexpected failure: `server_error` with
// status 500. A database that cannot be reached for the moment (a restart, a failover, a timeout:
// src/store/database-errors.ts) is answered instead as the rest of the service answers it: 503 with
// `Retry-After`, and, where the answer is an OAuth error, `temporarily_unavailable` (RFC 6749,
// 4.1.2.1), so a client knows to try again rather than to give up.
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { isDatabaseUnavailable } from '../store/database-errors.ts';

const UNAVAILABLE = Symbol('database unavailable');

type Marked = { [UNAVAILABLE]?: true };

/** True when the request's failure was the database's unavailability (noted by answerDatabaseOutages). */
export function failedForDatabase(ctx: object): boolean {
  return (ctx as Marked)[UNAVAILABLE] === true;
}

/** Registered before the other middleware, so that it sees every answer of theirs and of the routes. */
export function answerDatabaseOutages(provider: Provider): void {
  provider.on('server_error', (ctx: KoaContextWithOIDC, err: unknown) => {
    if (isDatabaseUnavailable(err)) (ctx as unknown as Marked)[UNAVAILABLE] = true;
  });
  provider.use(async (ctx, next) => {
    await next();
    if (!failedForDatabase(ctx)) return;
    ctx.status = 503;
    ctx.set('retry-after', '1');
    const body = ctx.body as { error?: unknown } | undefined;
    if (body && typeof body === 'object' && !Buffer.isBuffer(body) && body.error === 'server_error')
      ctx.body = {
        error: 'temporarily_unavailable',
        error_description: 'the service cannot reach its database at the moment; try again',
      };
  });
}
