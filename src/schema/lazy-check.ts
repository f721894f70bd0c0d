import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { ValueErrorIterator } from '@sinclair/typebox/errors';

/** The two calls made of a compiled schema: whether a value matches, and why not. */
export interface SchemaCheck<T extends TSchema> {
  Check(value: unknown): value is Static<T>;
  Errors(value: unknown): ValueErrorIterator;
}

/**
 * A schema's compiled check, compiled on its first call: a process pays for the checks it runs, not for every
 * check the modules it loads define (the primary loads many it never runs). The compiled check is kept.
 */
export function lazyCheck<T extends TSchema>(schema: T): SchemaCheck<T> {
  let compiled: TypeCheck<T> | undefined;
  const check = () => (compiled ??= TypeCompiler.Compile(schema));
  return {
    Check: (value: unknown): value is Static<T> => check().Check(value),
    Errors: (value: unknown) => check().Errors(value),
  };
}
