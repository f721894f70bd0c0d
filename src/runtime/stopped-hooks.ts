export type StoppedHook = () => void | Promise<void>;

/** Runs each hook in order; a failing one is logged and the others still run. */
export async function runStoppedHooks(hooks: readonly StoppedHook[], log: { error(details: object, message: string): void }): Promise<void> {
  for (const hook of hooks) {
    try {
      await hook();
    } catch (error) {
      log.error({ err: error }, 'releasing a resource at shutdown failed');
    }
  }
}
