// The admin CLI: `npm run idp -- <group> <command> [options]`. Human output by default, --json for
// scripts. Commands are defined once (src/cli/commands/); the parser and --help both read those
// definitions. Every failure is one line on stderr and a non-zero exit; nothing is changed.
import { parseArgs } from 'node:util';
import { checkStorage, ConfigError, databaseTimeouts, loadConfig, type Config } from '../config.ts';
import { enableSecurityNotifications } from '../audit/notifications.ts';
import { keyring, loadSecret } from '../crypto.ts';
import { openStore, type Store } from '../store/index.ts';
import { AppError } from '../errors.ts';
import { assertSecretMatches } from '../oauth/keys.ts';
import { operator } from '../audit/index.ts';
import type { BareCommandDef, BareCtx, CommandDef, CommandInfo, Ctx, Io, OptionDef, Values } from './command.ts';
import { orgCommands } from './commands/org.ts';
import { userCommands } from './commands/user.ts';
import { photoCommands } from './commands/photo.ts';
import { clientCommands } from './commands/client.ts';
import { passkeyCommands } from './commands/passkey.ts';
import { keysCommands } from './commands/keys.ts';
import { auditCommands } from './commands/audit.ts';
import { eventsCommands } from './commands/events.ts';
import { recoveryCommands } from './commands/recovery.ts';
import { inviteCommands } from './commands/invite.ts';
import { roleCommands } from './commands/role.ts';
import { mdsCommands } from './commands/mds.ts';
import { scimCommands } from './commands/scim.ts';
import { samlCommands } from './commands/saml.ts';
import { importCommands } from './commands/import.ts';
import { ldapCommands } from './commands/ldap.ts';
import { upstreamCommands } from './commands/upstream.ts';
import { backupCommands } from './commands/backup.ts';
import { appVersion } from '../package-files.ts';

export type { Io } from './command.ts';

export const COMMANDS: (CommandDef | BareCommandDef)[] = [
  ...orgCommands,
  ...userCommands,
  ...photoCommands,
  ...clientCommands,
  ...passkeyCommands,
  ...keysCommands,
  ...auditCommands,
  ...eventsCommands,
  ...recoveryCommands,
  ...inviteCommands,
  ...roleCommands,
  ...mdsCommands,
  ...scimCommands,
  ...samlCommands,
  ...importCommands,
  ...ldapCommands,
  ...upstreamCommands,
  ...backupCommands,
];

/** `serve` starts the service (src/command-line.ts); it is listed here so help and argument checks cover it. */
const SERVE: CommandInfo = {
  group: 'serve',
  name: '',
  summary: 'start the service; every setting comes from the environment (README: Configuration)',
  options: {},
};

/** Options every command takes. */
const COMMON: Record<string, OptionDef & { short?: string }> = {
  json: { type: 'boolean', description: 'print JSON, for scripts' },
  help: { type: 'boolean', short: 'h', description: 'show this help' },
};

const PROGRAM = 'npm run idp --';

function title(c: CommandInfo): string {
  return c.name ? `${c.group} ${c.name}` : c.group;
}

function optionText(name: string, o: OptionDef): string {
  return `--${name}${o.type === 'string' ? ` ${o.value ?? '<value>'}` : ''}`;
}

/** One line: the command, its arguments and options, optional ones in brackets. */
export function synopsis(c: CommandInfo): string {
  const args = (c.args ?? []).map((a) => `<${a.name}>`);
  const options = Object.entries(c.options).map(([name, o]) => {
    const text = `${optionText(name, o)}${o.multiple ? ' ...' : ''}`;
    return o.required ? text : `[${text}]`;
  });
  return [title(c), ...args, ...options].join(' ');
}

function columns(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
}

function commandHelp(c: CommandInfo): string {
  const common = c === SERVE ? { help: COMMON.help! } : COMMON;
  const options: [string, string][] = Object.entries({ ...c.options, ...common }).map(([name, o]) => [
    `${'short' in o && o.short ? `-${o.short}, ` : ''}${optionText(name, o)}`,
    `${o.description}${o.required ? ' (required)' : ''}${o.multiple ? ' (repeatable)' : ''}`,
  ]);
  const lines = [
    `usage: ${PROGRAM} ${synopsis(c)}${c === SERVE ? '   (npm start runs it)' : ' [--json]'}`,
    '',
    c.summary,
  ];
  if (c.args?.length) lines.push('', 'arguments:', ...columns(c.args.map((a) => [`<${a.name}>`, a.description])));
  lines.push('', 'options:', ...columns(options));
  return lines.join('\n');
}

function listing(commands: CommandInfo[]): string[] {
  return commands.flatMap((c) => [`  ${synopsis(c)}`, `      ${c.summary}`]);
}

function groupHelp(group: string): string {
  const commands = COMMANDS.filter((c) => c.group === group);
  return [
    `usage: ${PROGRAM} ${group} <command> [options] [--json]`,
    `       ${PROGRAM} ${group} <command> --help`,
    '',
    `${group} commands:`,
    ...listing(commands),
  ].join('\n');
}

export function usage(): string {
  return [
    `usage: ${PROGRAM} <command> [options] [--json]`,
    `       ${PROGRAM} <command> --help      (the options of one command)`,
    '',
    'commands:',
    ...listing([SERVE, ...COMMANDS]),
  ].join('\n');
}

const GROUPS = [...new Set(COMMANDS.map((c) => c.group))];

type Parsed = { help: true } | { help: false; values: Values; positionals: string[] };

class UsageError extends Error {}

/** parseArgs in non-strict mode, so every complaint is ours: short, naming the option and the usage. */
function parseCommand(c: CommandInfo, args: string[]): Parsed {
  const options = { ...c.options, ...COMMON };
  const { values, positionals, tokens } = parseArgs({
    args,
    options,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  if (values.help === true) return { help: true };
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    const def = options[t.name];
    if (!def) throw new UsageError(`unknown option '${t.rawName}'`);
    if (def.type === 'string' && typeof t.value !== 'string')
      throw new UsageError(`option '${t.rawName}' needs a value ${def.value ?? '<value>'}`);
    if (def.type === 'boolean' && t.value !== undefined) throw new UsageError(`option '${t.rawName}' takes no value`);
  }
  const expected = c.args?.length ?? 0;
  if (positionals.length > expected) throw new UsageError(`unexpected argument '${positionals[expected]}'`);
  return { help: false, values, positionals };
}

/** Required options and arguments: missing ones are reported like every other invalid input (exit 1). */
function checkRequired(c: CommandInfo, values: Values, positionals: string[]): void {
  for (const [name, o] of Object.entries(c.options)) {
    if (o.required && values[name] === undefined)
      throw new AppError(400, `--${name} is required${typeof o.required === 'string' ? ` (${o.required})` : ''}`);
  }
  (c.args ?? []).forEach((a, i) => {
    if (!positionals[i]) throw new AppError(400, `${a.name.replace(/_/g, ' ')} is required`);
  });
}

/** Help on stdout (exit 0) or usage on stderr after a mistake (exit 2). */
function say(io: Io, text: string, code: 0 | 2): number {
  if (code === 0) io.out(text);
  else io.err(text);
  return code;
}

/** Finds the command named by argv; prints help or an error itself and returns an exit code otherwise. */
function resolve(argv: string[], io: Io): { command: CommandDef | BareCommandDef; rest: string[] } | number {
  const [first, second] = argv;
  const wantsHelp = (arg: string | undefined) => arg === '--help' || arg === '-h';
  if (first === undefined) return say(io, usage(), 2);
  if (first === 'help' || wantsHelp(first)) return say(io, usage(), 0);
  if (first === '--version' && second === undefined) return say(io, appVersion(), 0);
  if (!GROUPS.includes(first)) return say(io, `error: unknown command '${first}' (see ${PROGRAM} --help)`, 2);
  if (wantsHelp(second)) return say(io, groupHelp(first), 0);
  // Three-word commands first (client secret rotate), then two-word ones.
  const longer = COMMANDS.find((c) => c.group === first && c.name === `${second} ${argv[2]}`);
  if (longer) return { command: longer, rest: argv.slice(3) };
  const command = COMMANDS.find((c) => c.group === first && c.name === second);
  if (command) return { command, rest: argv.slice(2) };
  // a one-word command (invite --org 1) takes everything after its name
  const single = COMMANDS.find((c) => c.group === first && c.name === '');
  if (single) return { command: single, rest: argv.slice(1) };
  if (second === undefined) return say(io, groupHelp(first), 2);
  const names = [...new Set(COMMANDS.filter((c) => c.group === first).map((c) => c.name.split(' ')[0]!))];
  const sub = COMMANDS.filter((c) => c.group === first && c.name.startsWith(`${second} `));
  if (sub.length > 0 && (argv[2] === undefined || wantsHelp(argv[2])))
    return say(io, [`${first} ${second} commands:`, ...listing(sub)].join('\n'), wantsHelp(argv[2]) ? 0 : 2);
  return say(
    io,
    `error: unknown command '${first} ${second}'; ${first} commands: ${names.join(', ')} (see ${PROGRAM} ${first} --help)`,
    2,
  );
}

/** Parses a command's arguments; undefined when it should run, else the exit code (help printed or usage error). */
function parseOrExplain(c: CommandInfo, args: string[], io: Io): Parsed | number {
  try {
    const parsed = parseCommand(c, args);
    if (parsed.help) return say(io, commandHelp(c), 0);
    return parsed;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    return say(io, `error: ${err.message} (usage: ${PROGRAM} ${synopsis(c)}; see ${PROGRAM} ${title(c)} --help)`, 2);
  }
}

/** `serve`'s own arguments: help (exit 0), anything else is refused (exit 2); undefined: start. */
export function checkServeArguments(args: string[], io: Io): number | undefined {
  const parsed = parseOrExplain(SERVE, args, io);
  return typeof parsed === 'number' ? parsed : undefined;
}

function configuration(env: NodeJS.ProcessEnv, io: Io): Config | number {
  try {
    const config = loadConfig(env);
    for (const path of checkStorage(config)) io.err(`note: created the default data directory ${path}`);
    return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.err(`configuration error: ${err.message}`);
    return 2;
  }
}

export async function runCli(argv: string[], io: Io, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const found = resolve(argv, io);
  if (typeof found === 'number') return found;
  const { command } = found;
  const parsed = parseOrExplain(command, found.rest, io);
  if (typeof parsed === 'number') return parsed;
  const { values, positionals } = parsed as Extract<Parsed, { help: false }>;
  if ('bare' in command) return runBare(command, values, positionals, io, env);
  let store: Store | undefined;
  try {
    checkRequired(command, values, positionals);
    const config = configuration(env, io);
    if (typeof config === 'number') return config;
    const keys = keyring(loadSecret(config, { generate: false }).secret);
    enableSecurityNotifications(config.smtpUrl !== undefined);
    store = await openStore(config.databaseUrl, { poolSize: 2, timeouts: databaseTimeouts(config) });
    await assertSecretMatches(store, keys);
    const ctx: Ctx = { config, store, keys, json: Boolean(values.json), io, actor: operator(env) };
    const result = await command.run(ctx, values, positionals);
    printResult(io, result);
    return ctx.exitCode ?? 0;
  } catch (err) {
    return reportFailure(io, err);
  } finally {
    await store?.close();
  }
}

/** What a command returned, on standard output: text as is, anything else as JSON. */
function printResult(io: Io, result: unknown): void {
  if (result !== undefined) io.out(typeof result === 'string' ? result : JSON.stringify(result, null, 2));
}

/** A command's failure in one line, and its exit code: 2 for the configuration, 1 for the rest. */
function reportFailure(io: Io, err: unknown): number {
  if (err instanceof ConfigError) {
    io.err(`configuration error: ${err.message}`);
    return 2;
  }
  io.err(`error: ${err instanceof AppError ? err.message : ((err as Error).message?.split('\n')[0] ?? String(err))}`);
  return 1;
}

/** A command run without the store or the secret; failures are reported as runCli reports them. */
async function runBare(
  command: BareCommandDef,
  values: Values,
  positionals: string[],
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  try {
    checkRequired(command, values, positionals);
    let config: Config | undefined;
    const ctx: BareCtx = {
      config: () => {
        if (config) return config;
        config = loadConfig(env);
        for (const path of checkStorage(config)) io.err(`note: created the default data directory ${path}`);
        return config;
      },
      json: Boolean(values.json),
      io,
    };
    const result = await command.run(ctx, values, positionals);
    printResult(io, result);
    return ctx.exitCode ?? 0;
  } catch (err) {
    return reportFailure(io, err);
  }
}
