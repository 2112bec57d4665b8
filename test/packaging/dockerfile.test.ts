// The Dockerfile's steps, run in order in a fresh temporary directory (images cannot be pulled or
// built here): the build stage's npm ci compiles the service from the build context, the production
// stage installs its production dependencies, and the final stage's ENTRYPOINT and CMD start it. It
// answers /readyz, its HEALTHCHECK passes, it writes nothing outside its VOLUME (so a read-only root
// file system is enough), and it runs as an unprivileged user who owns that volume.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { globSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../e2e/helpers.ts';
import { operatorEnv, ROOT, startAndWait, type Running } from './helpers.ts';
import { inImage, inStage, runDockerfile, type Stage } from './dockerfile-stages.ts';

const TIMEOUT = 20 * 60_000;

/** Every file of the image outside its volumes, with its size and modification time. */
function snapshot(image: Stage): string[] {
  const volumes = image.volumes.map((v) => inStage(image, v));
  return globSync('**', { cwd: image.root, withFileTypes: true })
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((path) => !volumes.some((v) => path === v || path.startsWith(`${v}/`)))
    .map((path) => {
      const s = statSync(path, { throwIfNoEntry: false });
      return `${path} ${s?.size ?? '-'} ${s?.mtimeMs ?? '-'}`;
    })
    .sort();
}

describe('Dockerfile: its stages run in order from the build context', { timeout: TIMEOUT }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'idp-dockerfile-'));
  let image: Stage;
  let url: string;
  let env: Record<string, string>;
  let service: Running | undefined;
  let before_: string[];

  const run = (argv: string[]) => {
    const { command, args, cwd } = inImage(image, argv);
    return spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 60_000 });
  };

  before(async () => {
    const { stages, log } = runDockerfile(join(ROOT, 'Dockerfile'), ROOT, tmp, operatorEnv());
    console.log(`# ${log.join('; ')}`);
    image = stages.at(-1)!;
    const port = await freePort();
    url = `http://localhost:${port}`;
    assert.deepEqual(image.volumes, ['/data']);
    // What `docker run -p <port>:8080 -e PUBLIC_URL=... -v <volume>:/data` changes: the port and the
    // public URL; the volume is the image's own /data.
    env = operatorEnv({
      ...image.env,
      PORT: String(port),
      PUBLIC_URL: url,
      DATA_DIR: inStage(image, '/data'),
      LOG_LEVEL: 'warn',
    });
    before_ = snapshot(image);
    const { command, args, cwd } = inImage(image, [...image.entrypoint, ...image.cmd]);
    service = await startAndWait(command, args, cwd, env, url);
  });

  after(async () => {
    await service?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('starts the service: /readyz answers 200 and discovery names the public URL', async () => {
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
    const discovery = (await (await fetch(`${url}/.well-known/openid-configuration`)).json()) as { issuer: string };
    assert.equal(discovery.issuer, url);
  });

  it('the HEALTHCHECK command passes while the service is ready', () => {
    assert.ok(image.healthcheck, 'the image has a HEALTHCHECK');
    assert.equal(image.healthcheck[0], image.entrypoint[0], "the check runs with the image's own Node.js");
    const check = run(image.healthcheck);
    assert.equal(check.error, undefined);
    assert.equal(check.status, 0, check.stderr);
  });

  it('the HEALTHCHECK command fails when nothing answers on the port', () => {
    const { command, args } = inImage(image, image.healthcheck!);
    const check = spawnSync(command, args, { env: { ...env, PORT: '9' }, encoding: 'utf8', timeout: 30_000 });
    assert.equal(check.error, undefined);
    assert.equal(check.status, 1, check.stderr);
  });

  it('the entrypoint also runs admin commands against the volume', () => {
    const listed = run([...image.entrypoint, 'org', 'list', '--json']);
    assert.equal(listed.status, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), []);
  });

  it('runs the compiled service with the flags of the production npm start, on the pinned runtime', () => {
    const pkg = JSON.parse(readFileSync(inStage(image, 'package.json'), 'utf8')) as { scripts: { start: string } };
    assert.equal(image.entrypoint[0], `${image.workdir}/node_modules/.bin/node`);
    assert.equal(['node', ...image.entrypoint.slice(1), ...image.cmd].join(' '), pkg.scripts.start);
    const version = run([image.entrypoint[0]!, '--version']);
    assert.match(version.stdout, /^v24\./);
  });

  it('runs as an unprivileged user who owns the volume, and exposes the port it listens on', () => {
    assert.ok(image.user, 'the image sets USER');
    assert.doesNotMatch(image.user, /^(0|root)(:|$)/);
    assert.equal(image.owners.get('/data'), image.user);
    assert.deepEqual(image.exposed, [image.env.PORT]);
    assert.equal(image.env.HOST, '0.0.0.0');
    assert.equal(image.env.DATA_DIR, '/data');
    // The runtime image has no shell to run anything with.
    assert.deepEqual(image.runs, []);
  });

  it('writes only to its volume, so a read-only root file system is enough', async () => {
    await service!.stop();
    service = undefined;
    assert.deepEqual(snapshot(image), before_);
    const data = globSync('*', { cwd: inStage(image, '/data') }).sort();
    assert.ok(data.includes('idp.sqlite') && data.includes('idp-secret'), `the volume holds ${data.join(', ')}`);
  });
});
