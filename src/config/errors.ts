/** A configuration problem, named by the dotted path of the offending field. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly field: string,
    readonly reason: string,
    readonly source?: string,
  ) {
    super(`${source ? `${source}: ` : ''}${field ? `${field}: ` : ''}${reason}`);
  }
}
