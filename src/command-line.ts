// The command line: `serve` starts the service; anything else is an admin command (no command: usage).
import { checkStorage, ConfigError, databaseTimeouts, loadConfig, type Config } from './config.ts';
import { loadSecret, type SecretSource } from './crypto.ts';
import { loadKeyring } from './oauth/master-secret.ts';
import { openStore, type Store } from './store/index.ts';
import { buildApp } from './app.ts';
import cluster from 'node:cluster';
import { createInterface } from 'node:readline';
import { runPrimary, type Notice } from './cluster.ts';
import { memoryRelease } from './memory.ts';
import { startTracing, stopTracing } from './http/tracing.ts';
import { checkServeArguments, runCli, type Io } from './cli/index.ts';

/** How long after listening the memory start-up left is given back. */
const STARTUP_RELEASE_DELAY_MS = 100;

function fatal(line: string, code = 1): never {
  process.stderr.write(`${line}\n`);
  process.exit(code);
}

/** Settings, storage directories and the secret: every problem is one `configuration error` line, exit 2. */
function prepare(): { config: Config; secret: SecretSource; created: string[] } {
  try {
    const config = loadConfig();
    const created = checkStorage(config);
    let secret: SecretSource;
    try {
      secret = loadSecret(config);
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError('IDP_SECRET', (err as Error).message.split('\n')[0]!);
    }
    return { config, secret, created };
  } catch (err) {
    if (err instanceof ConfigError) fatal(`configuration error: ${err.message}`, 2);
    throw err;
  }
}

async function openOrFail(config: Config): Promise<Store> {
  try {
    return await openStore(config.databaseUrl, { timeouts: databaseTimeouts(config) });
  } catch (err) {
    fatal(
      `database error: cannot open ${config.dialect === 'postgres' ? 'PostgreSQL' : config.databaseUrl}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
}

/** What start-up tells the operator once (by the primary when there are workers). */
function notices(created: string[], secret: SecretSource): Notice[] {
  const list: Notice[] = created.map((path) => ({
    level: 'info',
    fields: { path },
    msg: 'created the default data directory',
  }));
  if (secret.generated)
    list.push({
      level: 'warn',
      fields: { path: secret.path },
      msg: 'generated a new IDP_SECRET and stored it with mode 0600; back it up, signing keys are encrypted under it',
    });
  return list;
}

async function serve(): Promise<void> {
  const { config, secret, created } = prepare();
  if (config.workers > 1 && cluster.isPrimary) {
    // Migrations once, before any worker opens the database.
    await (await openOrFail(config)).close();
    runPrimary(config.workers, config.logLevel, notices(created, secret));
    return;
  }
  // Each serving process (every worker) sets up its own tracer; nothing is loaded when traces are off.
  try {
    await startTracing(config.tracesEndpoint, { clientAddress: config.tracesClientAddress });
  } catch (err) {
    fatal(`start-up failed: traces: ${(err as Error).message.split('\n')[0]}`);
  }
  const store = await openOrFail(config);
  let app;
  try {
    ({ app } = await buildApp({ config, store, keys: await loadKeyring(store, secret) }));
  } catch (err) {
    await store.close();
    fatal(`start-up failed: ${(err as Error).message.split('\n')[0]}`);
  }
  for (const notice of notices(created, secret)) app.log[notice.level](notice.fields, notice.msg);
  if (config.allowInsecurePublicUrl) {
    app.log.warn(
      { publicUrl: config.publicUrl },
      'PUBLIC_URL is plain http on a host that is not localhost (ALLOW_INSECURE_PUBLIC_URL=true): browsers will refuse passkeys and traffic is readable on the network',
    );
  }
  const memory = memoryRelease(config.memoryReleaseIdle * 1000, (released) =>
    app.log.debug(released, 'memory released'),
  );
  app.server.on('request', memory.served);
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    memory.stop();
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    app
      .close()
      .then(() => store.close())
      // the spans still buffered are sent before the process ends
      .then(() => stopTracing())
      .then(() => process.exit(0))
      .catch((err) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    fatal(`cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`);
  }
  app.log.info({ issuer: config.publicUrl, database: config.dialect }, 'identity provider ready');
  // What loading and compiling the modules left, given back a moment after listening: not before
  // the first answers (readiness probes) can go out, and before load usually arrives.
  if (config.memoryReleaseIdle > 0) setTimeout(memory.releaseNow, STARTUP_RELEASE_DELAY_MS).unref();
}

const io: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
  // One line from a terminal or a pipe; an input that ends first is an empty answer.
  readLine: (prompt) =>
    new Promise<string>((resolve) => {
      const lines = createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
      lines.once('close', () => resolve(''));
      lines.question(prompt, (answer) => {
        resolve(answer);
        lines.close();
      });
    }),
  // A status line redrawn in place (carriage return, then erase to the end of the line).
  ...(process.stderr.isTTY ? { progress: (line: string) => process.stderr.write(`\r${line}\x1b[K`) } : {}),
};

const argv = process.argv.slice(2);
if (argv[0] === 'serve') {
  const code = checkServeArguments(argv.slice(1), io);
  if (code === undefined) await serve();
  else process.exitCode = code;
} else {
  process.exitCode = await runCli(argv, io);
}
