// Runs a Dockerfile's stages without Docker: each stage's file system is a directory, the build
// context is this checkout as .dockerignore filters it, COPY copies (between stages too), RUN runs
// its command in the stage's WORKDIR with the stage's ENV. What the final stage would run (ENTRYPOINT
// and CMD, HEALTHCHECK) is returned with its paths mapped into that stage's directory. The base
// images' tools (node, npm, a shell) are the machine's: what is checked is that the Dockerfile's own
// steps install and start the service, in order, from nothing but the build context.
//
// Each stage has an npm cache of its own, in its own file system (/root/.npm, as in a container), so
// what a RUN does to it (`npm cache clean --force`) stays in the stage and never empties the
// operator's cache, which other installs running meanwhile read. It starts as a copy of the
// operator's cache, as a build's cache mount would: packages already downloaded are not fetched again.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join, matchesGlob, posix, relative } from 'node:path';
import { DockerfileParser, type Instruction } from 'dockerfile-ast';

export interface Stage {
  name: string | undefined;
  image: string;
  /** the directory standing for the stage's root file system */
  root: string;
  workdir: string;
  env: Record<string, string>;
  user: string | undefined;
  volumes: string[];
  exposed: string[];
  /** COPY --chown owners by destination path */
  owners: Map<string, string>;
  runs: string[];
  entrypoint: string[];
  cmd: string[];
  /** HEALTHCHECK CMD's command (exec form) */
  healthcheck: string[] | undefined;
}

/** .dockerignore as Docker reads it: the last matching pattern decides, `!` re-includes. */
export function dockerignore(context: string): (path: string) => boolean {
  let patterns: { glob: string; include: boolean }[] = [];
  try {
    patterns = readFileSync(join(context, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'))
      .map((line) => ({
        include: line.startsWith('!'),
        glob: posix.normalize(line.replace(/^!/, '').replace(/^\/+/, '')).replace(/\/+$/, ''),
      }));
  } catch {
    // no .dockerignore: everything is sent
  }
  return (path) => {
    const parts = path.split('/');
    let included = true;
    for (const { glob, include } of patterns) {
      // A pattern matching a directory matches everything below it.
      if (parts.some((_, i) => matchesGlob(parts.slice(0, i + 1).join('/'), glob))) included = include;
    }
    return included;
  };
}

/** Copies the files of the context below `from` that .dockerignore lets through. */
function copyFromContext(context: string, included: (path: string) => boolean, from: string, to: string): number {
  let copied = 0;
  const walk = (source: string, target: string) => {
    const rel = relative(context, source).split('\\').join('/');
    if (lstatSync(source).isDirectory()) {
      for (const entry of readdirSync(source)) walk(join(source, entry), join(target, entry));
    } else if (included(rel)) {
      mkdirSync(join(target, '..'), { recursive: true });
      cpSync(source, target);
      copied++;
    }
  };
  walk(from, to);
  return copied;
}

function jsonArgs(instruction: Instruction): string[] {
  const raw = instruction.getArgumentsContent() ?? '';
  const json = raw.slice(raw.indexOf('['));
  const parsed = JSON.parse(json) as unknown;
  assert.ok(Array.isArray(parsed), `${instruction.getKeyword()} in exec form (a JSON array): ${raw}`);
  return parsed as string[];
}

interface Context {
  dir: string;
  included: (path: string) => boolean;
  env: Record<string, string>;
  stages: Stage[];
  log: string[];
}

function inStage(stage: Stage, path: string): string {
  return join(stage.root, posix.resolve(stage.workdir, path));
}

function copy(ctx: Context, stage: Stage, instruction: Instruction): void {
  const flags = new Map(
    (instruction as unknown as { getFlags(): { getName(): string; getValue(): string | null }[] })
      .getFlags()
      .map((f) => [f.getName(), f.getValue() ?? ''] as const),
  );
  const args = instruction.getExpandedArguments().map((a) => a.getValue());
  const dest = args.pop()!;
  const target = inStage(stage, dest);
  const from = flags.get('from');
  const source = from === undefined ? undefined : ctx.stages.find((s) => s.name === from);
  assert.ok(from === undefined || source, `COPY --from=${from}: no such stage`);
  for (const arg of args) {
    // A directory's contents go into the destination; a file goes into it when it ends with '/'.
    if (source) {
      const path = join(source.root, posix.resolve(source.workdir, arg));
      const into = lstatSync(path).isDirectory() || !dest.endsWith('/') ? target : join(target, basename(path));
      cpSync(path, into, { recursive: true, verbatimSymlinks: true });
    } else {
      const path = join(ctx.dir, posix.normalize(arg));
      const into = lstatSync(path).isDirectory() ? target : join(target, dest.endsWith('/') ? basename(path) : '');
      const copied = copyFromContext(ctx.dir, ctx.included, path, into);
      assert.ok(copied > 0, `COPY ${arg}: nothing in the build context (.dockerignore)`);
    }
  }
  if (flags.has('chown')) stage.owners.set(posix.resolve(stage.workdir, dest), flags.get('chown')!);
}

/** The stage's own npm cache, /root/.npm in its file system: at first a copy of the operator's. */
function npmCache(ctx: Context, stage: Stage): string {
  const cache = join(stage.root, 'root', '.npm');
  if (!existsSync(cache)) {
    mkdirSync(cache, { recursive: true });
    const operators = join(ctx.env.npm_config_cache ?? join(ctx.env.HOME ?? homedir(), '.npm'), '_cacache');
    if (existsSync(operators)) cpSync(operators, join(cache, '_cacache'), { recursive: true });
  }
  return cache;
}

function runStep(ctx: Context, stage: Stage, instruction: Instruction): void {
  const raw = instruction.getArgumentsContent() ?? '';
  const command = raw.trimStart().startsWith('[') ? jsonArgs(instruction) : ['/bin/sh', '-c', raw];
  const cwd = inStage(stage, '.');
  mkdirSync(cwd, { recursive: true });
  const env = { ...ctx.env, npm_config_cache: npmCache(ctx, stage), ...stage.env };
  const started = performance.now();
  const result = spawnSync(command[0]!, command.slice(1), {
    cwd,
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(result.status, 0, `RUN ${raw} (stage ${stage.name}) failed:\n${result.stdout}\n${result.stderr}`);
  stage.runs.push(raw);
  ctx.log.push(`RUN ${raw} (${stage.name ?? 'final'}): ${Math.round(performance.now() - started)} ms`);
}

function step(ctx: Context, stage: Stage, instruction: Instruction): void {
  const keyword = instruction.getKeyword();
  const args = instruction.getExpandedArguments().map((a) => a.getValue());
  switch (keyword) {
    case 'WORKDIR':
      stage.workdir = posix.resolve(stage.workdir, args[0]!);
      mkdirSync(inStage(stage, '.'), { recursive: true });
      return;
    case 'COPY':
      return copy(ctx, stage, instruction);
    case 'RUN':
      return runStep(ctx, stage, instruction);
    case 'ENV':
      for (const p of (
        instruction as unknown as { getProperties(): { getName(): string; getValue(): string | null }[] }
      ).getProperties())
        stage.env[p.getName()] = p.getValue() ?? '';
      return;
    case 'USER':
      stage.user = args[0];
      return;
    case 'VOLUME':
      stage.volumes.push(...jsonArgs(instruction));
      return;
    case 'EXPOSE':
      stage.exposed.push(...args);
      return;
    case 'ENTRYPOINT':
      stage.entrypoint = jsonArgs(instruction);
      stage.cmd = [];
      return;
    case 'CMD':
      stage.cmd = jsonArgs(instruction);
      return;
    case 'HEALTHCHECK': {
      const raw = instruction.getArgumentsContent() ?? '';
      assert.match(raw, /(^|\s)CMD\s+\[/, `HEALTHCHECK CMD in exec form: ${raw}`);
      stage.healthcheck = jsonArgs(instruction);
      return;
    }
    case 'ARG':
    case 'LABEL':
    case 'STOPSIGNAL':
      return;
    default:
      assert.fail(`the Dockerfile uses ${keyword}, which this check does not run`);
  }
}

/** Runs every stage of the Dockerfile, in order, under dir; returns the stages (the last is the image). */
export function runDockerfile(
  dockerfile: string,
  context: string,
  dir: string,
  env: Record<string, string>,
): { stages: Stage[]; log: string[] } {
  const parsed = DockerfileParser.parse(readFileSync(dockerfile, 'utf8'));
  const ctx: Context = { dir: context, included: dockerignore(context), env, stages: [], log: [] };
  let stage: Stage | undefined;
  for (const instruction of parsed.getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const [image, as, name] = instruction.getExpandedArguments().map((a) => a.getValue());
      assert.ok(image && !ctx.stages.some((s) => s.name === image), `FROM ${image}: stages start from an image here`);
      stage = {
        name: as?.toUpperCase() === 'AS' ? name : undefined,
        image,
        root: join(dir, `stage-${ctx.stages.length}`),
        workdir: '/',
        env: {},
        user: undefined,
        volumes: [],
        exposed: [],
        owners: new Map(),
        runs: [],
        entrypoint: [],
        cmd: [],
        healthcheck: undefined,
      };
      mkdirSync(stage.root, { recursive: true });
      ctx.stages.push(stage);
    } else if (stage) {
      step(ctx, stage, instruction);
    } else {
      assert.equal(instruction.getKeyword(), 'ARG', 'only ARG comes before the first FROM');
    }
  }
  return { stages: ctx.stages, log: ctx.log };
}

/** A command of the image (exec form) as this machine runs it: absolute paths into the stage's directory. */
export function inImage(stage: Stage, argv: string[]): { command: string; args: string[]; cwd: string } {
  const [command, ...args] = argv;
  assert.ok(command, 'an empty command');
  return {
    command: command.startsWith('/') ? join(stage.root, command) : command,
    args,
    cwd: inStage(stage, '.'),
  };
}

export { inStage };
