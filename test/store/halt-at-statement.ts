// Preloaded (`node --import`) into a service that test/store/interrupted-migrations.test.ts starts:
// when the statement containing HALT_AT_SQL is about to run, it says so on stderr and stops the
// process there for good, so the test can kill it at that exact point of a migration. It wraps the
// drivers' own entry points (node:sqlite's prepare, pg's Client#query); nothing in src/ knows of it.
import { writeSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';

const marker = process.env.HALT_AT_SQL;

function haltAt(text: unknown): void {
  if (!marker || typeof text !== 'string' || !text.includes(marker)) return;
  writeSync(2, `HALTED AT ${marker}\n`);
  // blocks this thread for good: no later statement runs, no transaction ends
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

type Method = (this: unknown, ...args: unknown[]) => unknown;

/** Wraps a prototype's method so that haltAt sees the statement text its first argument carries. */
function watch(proto: object, name: string, text: (first: unknown) => unknown): void {
  const target = proto as Record<string, Method>;
  const original = target[name]!;
  target[name] = function (this: unknown, ...args: unknown[]) {
    haltAt(text(args[0]));
    return original.apply(this, args);
  };
}

watch(DatabaseSync.prototype, 'prepare', (sql) => sql);
watch(pg.Client.prototype, 'query', (config) =>
  typeof config === 'string' ? config : (config as { text?: unknown } | undefined)?.text,
);
