import type { TSchema } from '@sinclair/typebox';
import type { ValueError } from '@sinclair/typebox/errors';
import { closestMatch } from '../config/did-you-mean.js';
import { declaredFieldLike, unknownField } from '../schema/field-hint.js';
import type { SchemaCheck } from '../schema/lazy-check.js';

/**
 * The first violation of a compiled schema as `field: problem` (`endpoints.create.path: expected string`), the
 * form every 400 of this server takes, or undefined when the value is valid. `prefix` names where the value
 * sits in a larger document (`apis.0`). An unknown field names the declared one it is close to, also when the
 * violation reported first is the required field it misspells (`colection: unknown field (did you mean
 * "collection"?)`).
 */
export function schemaViolation<T extends TSchema>(check: SchemaCheck<T>, value: unknown, prefix = ''): string | undefined {
  if (check.Check(value)) return undefined;
  const errors: ValueError[] = [];
  for (const error of check.Errors(value)) if (errors.push(error) >= 16) break;
  const [first] = errors;
  const fieldOf = (error: ValueError | undefined) => [prefix, pathOf(error)].filter(Boolean).join('.') || 'value';
  if (first?.message === 'Expected required property') {
    const missing = lastKey(first.path);
    const misspelled = errors.find((error) => error.message === 'Unexpected property' && parentOf(error.path) === parentOf(first.path) && closestMatch(lastKey(error.path), [missing]) === missing);
    if (misspelled) return `${fieldOf(misspelled)}: ${unknownField(missing)}`;
  }
  if (first?.message === 'Unexpected property') return `${fieldOf(first)}: ${unknownField(declaredFieldLike(first.schema as { properties?: Record<string, unknown> }, lastKey(first.path)))}`;
  return `${fieldOf(first)}: ${describe(first?.message)}`;
}

const unescape = (segment: string) => segment.replaceAll('~1', '/').replaceAll('~0', '~');
const pathOf = (error: ValueError | undefined) => (error?.path ?? '').replace(/^\//, '').split('/').map(unescape).join('.');
const lastKey = (path: string) => unescape(path.slice(path.lastIndexOf('/') + 1));
const parentOf = (path: string) => path.slice(0, path.lastIndexOf('/'));

function describe(message: string | undefined): string {
  if (!message) return 'is invalid';
  if (message === 'Unexpected property') return 'unknown field';
  if (message === 'Expected required property') return 'is required';
  if (message === 'Expected union value') return 'does not match any allowed form';
  return message.charAt(0).toLowerCase() + message.slice(1);
}
