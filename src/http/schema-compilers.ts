// Route schemas compiled when a route first uses them, not while the service starts. Fastify's own
// compilers (Ajv for requests, fast-json-stringify for responses) do the compiling, with the options
// Fastify gives them; only the moment changes. Compiling every schema of every route at start-up was
// about a tenth of the time to ready, for routes many instances never serve. The first request to a
// route pays its compilation once (a few milliseconds). compileAll() compiles whatever is left: the
// tests call it on the whole application, so a schema that cannot compile fails there.
import buildAjvCompiler from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
type ValidatorFactory = NonNullable<CompilersFactory['buildValidator']>;
type SerializerFactory = NonNullable<CompilersFactory['buildSerializer']>;
type Validate = ((data: unknown) => unknown) & { errors?: unknown };
type Serialize = (data: unknown) => string;

export interface LazySchemaCompilers {
  /** Fastify's schemaController.compilersFactory */
  compilersFactory: { buildValidator: ValidatorFactory; buildSerializer: SerializerFactory };
  /** compiles every schema not compiled yet; returns how many it compiled */
  compileAll: () => number;
}

export function lazySchemaCompilers(): LazySchemaCompilers {
  const pending = new Set<() => void>();
  const buildValidator = buildAjvCompiler() as unknown as (...args: unknown[]) => (route: unknown) => Validate;
  const buildSerializer = SerializerSelector() as unknown as (...args: unknown[]) => (route: unknown) => Serialize;

  /** compile(), once: at the first call of what it returns, or at compileAll() */
  const onFirstUse = <F>(compile: () => F) => {
    let compiled: F | undefined;
    const ensure = () => {
      if (compiled === undefined) {
        compiled = compile();
        pending.delete(ensure);
      }
      return compiled;
    };
    pending.add(ensure);
    return { get: () => compiled ?? ensure(), compiled: () => compiled };
  };
  const lazyValidator = (compile: (route: unknown) => Validate) => (route: unknown) => {
    const validator = onFirstUse(() => compile(route));
    const validate: Validate = (data) => validator.get()(data);
    // Fastify reads a failed validation's errors from the function it was given
    Object.defineProperty(validate, 'errors', { get: () => validator.compiled()?.errors });
    return validate;
  };
  const lazySerializer = (compile: (route: unknown) => Serialize) => (route: unknown) => {
    const serializer = onFirstUse(() => compile(route));
    return (data: unknown) => serializer.get()(data);
  };

  return {
    compilersFactory: {
      buildValidator: ((...args: unknown[]) => lazyValidator(buildValidator(...args))) as unknown as ValidatorFactory,
      buildSerializer: (...args: unknown[]) => lazySerializer(buildSerializer(...args)),
    },
    compileAll: () => {
      const left = [...pending];
      for (const ensure of left) ensure();
      return left.length;
    },
  };
}
