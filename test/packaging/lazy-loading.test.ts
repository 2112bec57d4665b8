// sharp and @simplewebauthn/server are loaded on first use: a service that serves no photo and no
// passkey ceremony never loads them (less resident memory, a faster start), and the first photo or
// ceremony loads them once. Module loads are seen through a module.registerHooks load hook.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { freePort } from '../e2e/helpers.ts';
import { ROOT } from './helpers.ts';

const SHARP = /\/node_modules\/sharp\//;
const WEBAUTHN = /\/node_modules\/@simplewebauthn\/server\//;

const loadedHere: string[] = [];
registerHooks({
  load(url, context, nextLoad) {
    loadedHere.push(url);
    return nextLoad(url, context);
  },
});

/** A valid 2x2 RGB PNG, made here (sharp is what is under test). */
function tinyPng(): Buffer {
  const crc = (bytes: Buffer) => {
    let c = ~0;
    for (const byte of bytes) {
      c ^= byte;
      for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
    }
    return ~c >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(2, 0);
  header.writeUInt32BE(2, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

describe('heavy libraries load on first use', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'idp-lazy-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));

  describe('a service that handles no photo and no passkey ceremony', () => {
    let loaded: string[];

    before(async () => {
      const hook = join(tmp, 'record-loads.mjs');
      const list = join(tmp, 'loaded.txt');
      writeFileSync(
        hook,
        [
          "import { registerHooks } from 'node:module';",
          "import { writeFileSync } from 'node:fs';",
          'const loaded = [];',
          'registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });',
          `process.on('exit', () => writeFileSync(${JSON.stringify(list)}, loaded.join('\\n')));`,
        ].join('\n'),
      );
      const port = await freePort();
      const url = `http://localhost:${port}`;
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PORT: String(port),
        PUBLIC_URL: url,
        DATA_DIR: tmp,
        LOG_LEVEL: 'warn',
      };
      delete env.DATABASE_URL;
      delete env.IDP_SECRET;
      const child = spawn(process.execPath, ['--import', hook, 'src/main.ts', 'serve'], {
        cwd: ROOT,
        env,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      for (let i = 0; ; i++) {
        if (child.exitCode !== null || i === 300) assert.fail(`the service did not become ready: ${stderr}`);
        if (
          (await fetch(`${url}/readyz`).then(
            (r) => r.status,
            () => 0,
          )) === 200
        )
          break;
        await new Promise((r) => setTimeout(r, 100));
      }
      for (const path of ['/.well-known/openid-configuration', '/openid/jwks', '/healthz'])
        assert.equal((await fetch(`${url}${path}`)).status, 200, path);
      child.kill('SIGTERM');
      await exited;
      loaded = readFileSync(list, 'utf8').split('\n');
    });

    it('loaded the service and its libraries', () => {
      assert.ok(loaded.some((url) => url.endsWith('/src/main.ts')));
      assert.ok(loaded.some((url) => /\/node_modules\/oidc-provider\//.test(url)));
      assert.ok(loaded.some((url) => url.endsWith('/src/directory/photos.ts')));
      assert.ok(loaded.some((url) => url.endsWith('/src/webauthn/registration.ts')));
    });

    it('never loaded sharp', () =>
      assert.deepEqual(
        loaded.filter((url) => SHARP.test(url)),
        [],
      ));

    it('never loaded @simplewebauthn/server', () =>
      assert.deepEqual(
        loaded.filter((url) => WEBAUTHN.test(url)),
        [],
      ));
  });

  it('the first photo loads sharp, once', async () => {
    const { processPhoto } = await import('../../src/directory/photos.ts');
    assert.deepEqual(
      loadedHere.filter((url) => SHARP.test(url)),
      [],
    );
    const [first, second] = await Promise.all([processPhoto(tinyPng()), processPhoto(tinyPng())]);
    assert.deepEqual([first.width, first.height, second.width], [128, 128, 128]);
    const sharpEntry = loadedHere.filter((url) => /\/node_modules\/sharp\/dist\/index\.mjs$/.test(url));
    assert.equal(sharpEntry.length, 1);
  });

  it('the first ceremony loads @simplewebauthn/server, once', async () => {
    const { webauthnServer } = await import('../../src/webauthn/library.ts');
    await import('../../src/webauthn/registration.ts');
    await import('../../src/webauthn/authentication.ts');
    assert.deepEqual(
      loadedHere.filter((url) => WEBAUTHN.test(url)),
      [],
    );
    const [a, b] = await Promise.all([webauthnServer(), webauthnServer()]);
    assert.equal(a, b);
    const options = await a.generateAuthenticationOptions({ rpID: 'localhost' });
    assert.equal(typeof options.challenge, 'string');
    assert.equal(loadedHere.filter((url) => /\/@simplewebauthn\/server\/esm\/index\.js$/.test(url)).length, 1);
  });
});
