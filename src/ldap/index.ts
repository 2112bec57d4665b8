// LDAP directories: the periodic sync of those added with --sync-every (docs/ldap.md). Every
// instance runs the job; a directory's sync lease (a conditional update of its row) lets one
// instance at a time sync it, and a run that dies with its instance frees it when the lease ends.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { dueLdapDirectories } from '../store/ldap.ts';
import { AppError } from '../errors.ts';
import { syncLdapDirectory } from './sync.ts';

/** How often the job looks for a directory whose sync is due. */
export const CHECK_EVERY_MS = 30_000;

export interface LdapOptions {
  store: Store;
  keys: Keyring;
  now: () => number;
  /** how often to look for due directories (tests: shorter) */
  checkEveryMs?: number;
}

export interface LdapSyncJob {
  /** syncs every due directory once; how many ran */
  runOnce(): Promise<number>;
  stop(): Promise<void>;
}

export function startLdapSyncJob(o: LdapOptions, log?: FastifyBaseLogger): LdapSyncJob {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number> | undefined;

  async function runOnce(): Promise<number> {
    let ran = 0;
    for (const d of await dueLdapDirectories(o.store.db, o.now())) {
      if (stopped) break;
      const id = Number(d.id);
      try {
        const s = await syncLdapDirectory(o.store, o.keys, id, { dueAt: o.now() });
        ran++;
        const { created, updated, disabled, enabled, removed, unchanged, rejected } = s;
        const counts = { created, updated, disabled, enabled, removed, unchanged, rejected };
        log?.info({ event: 'ldap.sync', directory: id, mode: s.mode, ...counts }, 'LDAP directory synced');
      } catch (err) {
        // Another instance holds it: nothing to say. A failure is recorded with the directory.
        if (err instanceof AppError && err.status === 409) continue;
        const message = err instanceof AppError ? err.message : 'unexpected error';
        log?.warn({ event: 'ldap.sync_failed', directory: id, error: message }, 'LDAP directory sync failed');
      }
    }
    return ran;
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      running = runOnce();
      running.then(
        () => schedule(o.checkEveryMs ?? CHECK_EVERY_MS),
        (err: unknown) => {
          log?.warn({ err }, 'LDAP sync: the directories could not be read, retrying');
          schedule((o.checkEveryMs ?? CHECK_EVERY_MS) * 4);
        },
      );
    }, ms);
    timer.unref();
  }
  schedule(o.checkEveryMs ?? CHECK_EVERY_MS);

  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}

export function ldapPlugin(o: LdapOptions) {
  return async function ldap(app: FastifyInstance) {
    const job = startLdapSyncJob(o, app.log);
    app.addHook('onClose', async () => job.stop());
  };
}
