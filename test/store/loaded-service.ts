// A real listening service with an organization, a passkey API client, users and their passkeys,
// and requests against it from several loops at once: the load under which the store tests
// disturb the database (cut its connections, lock it from the admin CLI).
import { request } from 'node:http';
import { basicAuth, cli, seedOrg, seedUser, spawnService, type ServiceProcess } from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';

export interface LoadedService {
  service: ServiceProcess;
  token: string;
  /** each user's eppn and the ids of their passkeys */
  users: { eppn: string; passkeys: number[] }[];
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a connection of its own; a connection error is status 0. */
export function call(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<Answer>((resolve) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.once('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.once('error', (err) => resolve({ status: 0, headers: {}, body: err.message }));
    req.setTimeout(15_000, () => req.destroy(new Error(`no answer from ${url} within 15 s`)));
    req.end(options.body);
  });
}

export async function startLoadedService(
  databaseUrl: string,
  counts: { users: number; passkeysEach: number },
  env: Record<string, string> = {},
): Promise<LoadedService> {
  const store = await openStore(databaseUrl);
  const users: LoadedService['users'] = [];
  try {
    await seedOrg({ store });
    for (let i = 0; i < counts.users; i++) {
      const user = await seedUser({ store }, 1, `user${i}@example.org`);
      const passkeys = await seedPasskeys(store, 1, [user.id], counts.passkeysEach);
      users.push({ eppn: user.eppn, passkeys });
    }
  } finally {
    await store.close();
  }
  const added = await cli(databaseUrl, [
    ...['client', 'add', '--name', 'api', '--scopes', 'passkey.read passkey.delete', '--orgs', '1', '--json'],
  ]);
  if (added.code !== 0) throw new Error(`client add: ${added.err}`);
  const client = JSON.parse(added.out) as { client_id: string; client_secret: string };
  const service = await spawnService({ DATABASE_URL: databaseUrl, ...env });
  const answer = await call(`${service.url}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: basicAuth(client.client_id, client.client_secret),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials&scope=passkey.read%20passkey.delete',
  });
  if (answer.status !== 200) {
    await service.stop();
    throw new Error(`token: ${answer.status} ${answer.body}`);
  }
  return { service, token: (JSON.parse(answer.body) as { access_token: string }).access_token, users };
}

/**
 * Runs `loops` request loops until stop() resolves: each lists a user's passkeys, then deletes one of
 * them, round robin over the users. Every answer is kept with what was asked.
 */
export async function underLoad(
  loaded: LoadedService,
  loops: number,
  stop: () => Promise<void>,
): Promise<(Answer & { what: string })[]> {
  const answers: (Answer & { what: string })[] = [];
  const headers = { authorization: `Bearer ${loaded.token}` };
  let running = true;
  let next = 0;
  const loop = async () => {
    while (running) {
      const user = loaded.users[next++ % loaded.users.length]!;
      const list = `GET /2/passkey/1?eppn=${user.eppn}`;
      answers.push({ what: list, ...(await call(`${loaded.service.url}/2/passkey/1?eppn=${user.eppn}`, { headers })) });
      const id = user.passkeys.pop();
      if (id === undefined) continue;
      const remove = `DELETE /2/passkey/1/${id}`;
      answers.push({
        what: remove,
        ...(await call(`${loaded.service.url}/2/passkey/1/${id}`, { method: 'DELETE', headers })),
      });
    }
  };
  const loopsRunning = Array.from({ length: loops }, loop);
  try {
    await stop();
  } finally {
    running = false;
    await Promise.all(loopsRunning);
  }
  return answers;
}
