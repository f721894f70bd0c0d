import type { Logger } from '../logging/logger.js';
import type { ResolvedConfig } from '../config/schema.js';

/**
 * A primary-side extension: `install` runs in the primary, in registration order, before the first worker
 * is forked (so `patchWorkerEnv` / `overrideWorkerCount` shape the whole fleet); `uninstall` runs during the
 * graceful shutdown once the workers are gone, in reverse order. Workers never install plugins.
 */
export interface Plugin<S> {
  name: string;
  install(server: S, log: Logger, config: ResolvedConfig): void | Promise<void>;
  uninstall?(server: S): void | Promise<void>;
}

type Phase = 'registering' | 'installing' | 'forked';

/**
 * Holds the plugins of one primary through their lifecycle. Registration and the worker-shaping calls are
 * open until the workers are forked (`close`); after that they throw, because they could no longer apply
 * to the whole fleet.
 */
export class PluginHost<S> {
  private readonly registered: Plugin<S>[] = [];
  private readonly installed: Plugin<S>[] = [];
  private phase: Phase = 'registering';
  private installing: string | undefined;

  /** The plugin whose `install` is running (for log lines), if any. */
  get current(): string | undefined {
    return this.installing;
  }

  get names(): string[] {
    return this.registered.map((plugin) => plugin.name);
  }

  register(plugin: Plugin<S>): void {
    this.assertOpen('use()');
    validatePlugin(plugin);
    if (this.registered.some((other) => other.name === plugin.name)) throw new Error(`use(): a plugin named "${plugin.name}" is already registered`);
    this.registered.push(plugin);
  }

  /** Throws when the workers were already forked: `what` can no longer apply to every worker. */
  assertOpen(what: string): void {
    if (this.phase === 'forked') {
      throw new Error(`${what}: the workers were already forked; call it before they are (plugins passed to init, or from a plugin's install())`);
    }
  }

  /**
   * Installs every registered plugin in order, including plugins an `install` registers itself (they come
   * after it). The first failure stops the start: plugins already installed are uninstalled again and the
   * error names the plugin, on one line.
   */
  async installAll(server: S, log: Logger, config: ResolvedConfig): Promise<void> {
    this.phase = 'installing';
    for (let index = 0; index < this.registered.length; index++) {
      const plugin = this.registered[index]!;
      this.installing = plugin.name;
      try {
        await plugin.install(server, log.child({ plugin: plugin.name }), config);
      } catch (error) {
        this.installing = undefined;
        await this.uninstallAll(server, log);
        const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0];
        throw new Error(`plugin "${plugin.name}" failed to install: ${reason}`, { cause: error });
      }
      this.installed.push(plugin);
    }
    this.installing = undefined;
  }

  /** The workers are being forked: no more plugins, env patches or worker-count overrides. */
  close(): void {
    this.phase = 'forked';
  }

  /** Reverse order of installation; a failing `uninstall` is logged and the others still run. */
  async uninstallAll(server: S, log: Logger): Promise<void> {
    while (this.installed.length > 0) {
      const plugin = this.installed.pop()!;
      try {
        await plugin.uninstall?.(server);
      } catch (error) {
        log.error({ err: error, plugin: plugin.name }, 'plugin uninstall failed');
      }
    }
  }
}

function validatePlugin(plugin: unknown): asserts plugin is Plugin<unknown> {
  const candidate = plugin as Partial<Plugin<unknown>> | null;
  if (typeof candidate !== 'object' || candidate === null) throw new TypeError('use(): a plugin is an object { name, install, uninstall? }');
  if (typeof candidate.name !== 'string' || candidate.name.trim() === '') throw new TypeError('use(): a plugin needs a non-empty string name');
  if (typeof candidate.install !== 'function') throw new TypeError(`use(): plugin "${candidate.name}" has no install() function`);
  if (candidate.uninstall !== undefined && typeof candidate.uninstall !== 'function') throw new TypeError(`use(): plugin "${candidate.name}": uninstall must be a function`);
}
