// What an admin command is: its definition (the parser and the help both read it) and the small
// helpers the command files share.
import type { Config } from '../config.ts';
import type { Keyring, SecretSource } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { badRequest } from '../errors.ts';
import { parseList } from '../clients/index.ts';
import { findOrganization } from '../store/directory.ts';
import type { Actor, Change } from '../audit/index.ts';

export interface Io {
  out(line: string): void;
  err(line: string): void;
  readStdin(): Promise<string>;
  /** asks on stderr and reads one line (a terminal or a pipe); without it the first line of stdin */
  readLine?(prompt: string): Promise<string>;
  /** rewrites one status line on stderr; only when stderr is a terminal */
  progress?(line: string): void;
}

export interface Ctx {
  config: Config;
  store: Store;
  keys: Keyring;
  /** where the master secret came from (and the previous one, during a rotation) */
  secret?: SecretSource;
  json: boolean;
  io: Io;
  /** the operator running the command, for the audit trail */
  actor: Actor;
  /** set by a command that did only part of its work (an import with rejected lines): the exit code */
  exitCode?: number;
}

/** The actor and time of a change made by this command. */
export function by(ctx: Ctx): Change {
  return { actor: ctx.actor };
}

/** Asks for a typed confirmation; true only when the answer is exactly `expected`. */
export async function confirmed(ctx: Ctx, question: string, expected: string): Promise<boolean> {
  const answer = ctx.io.readLine ? await ctx.io.readLine(question) : (await ctx.io.readStdin()).split(/\r?\n/)[0]!;
  return answer.trim() === expected;
}

/** A duration such as 90s, 30m, 12h, 7d (or plain seconds); milliseconds. */
export function durationOption(value: string, name: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (!match) throw badRequest(`--${name} must be a duration such as 90s, 30m, 12h or 7d`);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit * 1000;
}

export interface OptionDef {
  type: 'string' | 'boolean';
  /** may be given more than once; the values arrive as an array */
  multiple?: boolean;
  /** placeholder shown in usage, e.g. '<id>' */
  value?: string;
  /** the command cannot run without it; a string explains why, in the error */
  required?: true | string;
  description: string;
}

export interface ArgumentDef {
  /** shown as <name>; a missing one is reported as 'client id is required' for client_id */
  name: string;
  description: string;
}

/** A command as help and the parser see it. */
export interface CommandInfo {
  /** first word: org, user, client, ... */
  group: string;
  /** second word: add, list, ... (empty for a one-word command) */
  name: string;
  summary: string;
  args?: ArgumentDef[];
  options: Record<string, OptionDef>;
}

export type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** A string option's value, or undefined when it was not given. */
export function optional(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

/** A repeatable string option's values. */
export function repeated(values: Values, name: string): string[] | undefined {
  const v = values[name];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
}

export interface CommandDef extends CommandInfo {
  run(ctx: Ctx, values: Values, positionals: string[]): Promise<unknown>;
}

/** What a command that works on files, without the store or the secret, is given. */
export interface BareCtx {
  /** the settings; read only when the command asks (verifying a backup needs none) */
  config(): Config;
  json: boolean;
  io: Io;
  exitCode?: number;
}

/** A command that must not open the database (backups, restores into a stopped service). */
export interface BareCommandDef extends CommandInfo {
  bare: true;
  run(ctx: BareCtx, values: Values, positionals: string[]): Promise<unknown>;
}

export function intOption(value: unknown, name: string): number {
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value) || Number(value) < 1)
    throw badRequest(`--${name} must be a positive integer (at most 15 digits)`);
  return Number(value);
}

/** A non-empty string option (the parser has already checked that required options are present). */
export function required(values: Values, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw badRequest(`--${name} is required`);
  return v;
}

export function orgList(value: string | undefined): number[] {
  if (value === undefined) return [];
  return parseList(value).map((v) => intOption(v, 'orgs'));
}

/** At least one id, each an existing organization: a typo must fail, not silently grant or revoke nothing. */
export async function existingOrgs(ctx: Ctx, value: string): Promise<number[]> {
  const ids = orgList(value);
  if (ids.length === 0) throw badRequest('--orgs needs at least one organization id');
  for (const id of ids)
    if (!(await findOrganization(ctx.store.db, id))) throw badRequest(`organization ${id} does not exist`);
  return ids;
}

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) =>
    columns.map((c) => (r[c] === null || r[c] === undefined ? '-' : String(r[c] as string | number | boolean))),
  );
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns), ...cells.map(line)].join('\n');
}

export async function readPassword(ctx: Ctx): Promise<string> {
  const text = await ctx.io.readStdin();
  const password = text.replace(/\r?\n$/, '');
  if (!password) throw badRequest('no password on standard input');
  return password;
}
