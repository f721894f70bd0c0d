import type { TSchema } from '@sinclair/typebox';
import type { SchemaCheck } from '../schema/lazy-check.js';

/**
 * The first violation of a compiled schema as `field: problem` (`endpoints.create.path: expected string`), the
 * form every 400 of this server takes, or undefined when the value is valid. `prefix` names where the value
 * sits in a larger document (`apis.0`).
 */
export function schemaViolation<T extends TSchema>(check: SchemaCheck<T>, value: unknown, prefix = ''): string | undefined {
  if (check.Check(value)) return undefined;
  const error = check.Errors(value).First();
  const path = (error?.path ?? '').replace(/^\//, '').replaceAll('/', '.').replaceAll('~1', '/').replaceAll('~0', '~');
  const field = [prefix, path].filter(Boolean).join('.') || 'value';
  return `${field}: ${describe(error?.message)}`;
}

function describe(message: string | undefined): string {
  if (!message) return 'is invalid';
  if (message === 'Unexpected property') return 'unknown field';
  if (message === 'Expected required property') return 'is required';
  if (message === 'Expected union value') return 'does not match any allowed form';
  return message.charAt(0).toLowerCase() + message.slice(1);
}
