// Entry point: `serve` starts the service; anything else is an admin command.
import { ConfigError, loadConfig } from './config.ts';
import { keyring, loadSecret } from './crypto.ts';
import { openStore } from './store/index.ts';
import { buildApp } from './app.ts';
import { runCli } from './cli/index.ts';

function fatal(line: string, code = 1): never {
  process.stderr.write(`${line}\n`);
  process.exit(code);
}

async function serve(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fatal(`configuration error: ${err.message}`, 2);
    throw err;
  }
  let secret;
  try {
    secret = loadSecret(config);
  } catch (err) {
    fatal(`configuration error: IDP_SECRET: ${(err as Error).message}`, 2);
  }
  let store;
  try {
    store = await openStore(config.databaseUrl);
  } catch (err) {
    fatal(`database error: cannot open ${config.dialect === 'postgres' ? 'PostgreSQL' : config.databaseUrl}: ${(err as Error).message.split('\n')[0]}`);
  }
  let app;
  try {
    ({ app } = await buildApp({ config, store, keys: keyring(secret.secret) }));
  } catch (err) {
    await store.close();
    fatal(`start-up failed: ${(err as Error).message.split('\n')[0]}`);
  }
  if (secret.generated) app.log.warn({ path: secret.path }, 'generated a new IDP_SECRET and stored it with mode 0600; back it up, signing keys are encrypted under it');
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    app
      .close()
      .then(() => store.close())
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
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'serve' || command === undefined) {
  await serve();
} else {
  const code = await runCli([command, ...rest], {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
  });
  process.exitCode = code;
}
