// Malformed HTTP sent to the authorization server (a body cut short of its Content-Length, a broken
// chunk) is the client's error: answered 400 and logged as a warning with the request id, never at
// error level, where it would page an operator for nothing they can mend. Over real sockets.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import {
  dialects,
  migratedDatabase,
  testConfig,
  seedClient,
  basicAuth,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { buildApp, type App } from '../../src/app.ts';

type Line = Record<string, any>;

/** Writes `text` on a fresh connection and half-closes it; the status line of the answer. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(text));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('close', () => resolve(answer.split('\r\n')[0] ?? ''));
    socket.on('error', reject);
  });
}

for (const dialect of dialects()) {
  describe(`malformed HTTP at the authorization server (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let built: App;
    let port: number;
    let authorization: string;
    const lines: Line[] = [];

    before(async () => {
      database = await migratedDatabase(dialect);
      const config = testConfig(database.url, { LOG_LEVEL: 'info' });
      store = await openStore(config.databaseUrl);
      const keys = keyring(TEST_SECRET);
      const logStream = new PassThrough();
      let pending = '';
      logStream.on('data', (chunk) => {
        pending += chunk;
        const complete = pending.split('\n');
        pending = complete.pop()!;
        for (const l of complete) if (l) lines.push(JSON.parse(l) as Line);
      });
      built = await buildApp({ config, store, keys, logStream });
      await built.app.listen({ port: 0, host: '127.0.0.1' });
      port = (built.app.server.address() as AddressInfo).port;
      const client = await seedClient({ store, keys }, { scopes: ['passkey.read'] });
      authorization = basicAuth(client.clientId, client.secret);
    });
    after(async () => {
      await built?.app.close();
      await store?.close();
      await database?.drop();
    });

    const head = (path: string, extra: string) =>
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\n` +
      `Content-Type: application/x-www-form-urlencoded\r\n${extra}\r\n`;

    const cases: [string, (path: string) => string][] = [
      ['a body shorter than its Content-Length', (path) => `${head(path, 'Content-Length: 80\r\n')}grant_type=client`],
      [
        'a chunk size that is not a number',
        (path) => `${head(path, 'Transfer-Encoding: chunked\r\n')}5\r\ngrant\r\nZZ\r\n_type\r\n0\r\n\r\n`,
      ],
    ];

    for (const [name, request] of cases)
      for (const path of ['/oauth/token', '/oauth/par'])
        it(`${name} at ${path}: 400, logged as a warning`, async () => {
          const from = lines.length;
          assert.match(await rawRequest(port, request(path)), /^HTTP\/1\.1 400 /);
          await new Promise((resolve) => setTimeout(resolve, 200));
          const logged = lines.slice(from);
          assert.deepEqual(
            logged.filter((l) => l.level >= 50),
            [],
            'nothing at error level',
          );
          const warning = logged.find((l) => l.msg === 'malformed HTTP request');
          assert.ok(warning, `a warning: ${JSON.stringify(logged)}`);
          assert.equal(warning.level, 40);
          assert.match(warning.err.code, /^HPE_/);
          assert.equal(typeof warning.reqId, 'string');
        });
  });
}
