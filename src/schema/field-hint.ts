import { closestMatch } from '../config/did-you-mean.js';

type ObjectSchema = { properties?: Record<string, unknown>; items?: unknown };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The (JSON) schema of the value at `path` inside `schema`, through properties and array items; undefined past a union. */
export function schemaAt(schema: unknown, path: readonly string[]): ObjectSchema | undefined {
  let at = schema as ObjectSchema | undefined;
  for (const segment of path) {
    if (!isObject(at)) return undefined;
    at = (at.properties && Object.hasOwn(at.properties, segment) ? at.properties[segment] : /^\d+$/.test(segment) ? at.items : undefined) as ObjectSchema | undefined;
  }
  return isObject(at) ? at : undefined;
}

/** The declared field of `objectSchema` closest to the unknown `key`, when close enough to be its typo. */
export function declaredFieldLike(objectSchema: ObjectSchema | undefined, key: string): string | undefined {
  const declared = Object.keys(objectSchema?.properties ?? {});
  return declared.includes(key) ? undefined : closestMatch(key, declared);
}

/**
 * A required field reported missing is often one the caller misspelled: the field of `value` that
 * `objectSchema` does not declare and that is close to `missing` (`colection` for `collection`).
 */
export function misspelledAs(objectSchema: ObjectSchema | undefined, value: unknown, missing: string): string | undefined {
  if (!isObject(value)) return undefined;
  const declared = objectSchema?.properties ?? {};
  return Object.keys(value).find((key) => !Object.hasOwn(declared, key) && closestMatch(key, [missing]) === missing);
}

/** `unknown field (did you mean "collection"?)`, or `unknown field` with no close declared name. */
export const unknownField = (hint: string | undefined) => (hint ? `unknown field (did you mean "${hint}"?)` : 'unknown field');
