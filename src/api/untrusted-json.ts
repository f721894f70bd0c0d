/**
 * JSON.parse for input from outside (webhook bodies, resource files) that refuses the keys which poison
 * prototypes once a consumer merges the result into another object, as the HTTP body parser does.
 */
export function parseUntrustedJson(text: string): unknown {
  return JSON.parse(text, (key, value: unknown) => {
    if (key === '__proto__' || (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype'))) {
      throw new SyntaxError(`"${key}" keys are not allowed`);
    }
    return value;
  });
}
