import type { Authorizer } from '../auth/authorize.js';
import type { Store } from '../db/types.js';
import { createManagerServices, type ManagerServices } from '../manager/compose.js';
import { persistConnection, resolveConnection, type ManagerConnection } from '../manager/connection.js';
import { LocalProvider } from '../manager/local-provider.js';
import { bindIssuedKeys } from '../manager/server-keys.js';
import { systemClock } from '../runtime/clock.js';
import type { RequestResult } from '../ipc/handlers.js';
import type { ServerEmitter } from '../runtime/events.js';
import type { SecretKeyring } from '../secrets/keyring.js';
import { openAutomation, type Automation } from '../workflows/automation.js';
import type { ServerIdentity } from '../server.js';

/**
 * SPEC 10–13 of one process: API providers, workflows and webhooks (with the built-in `local` provider in front
 * of the workflows' provider calls), then the manager over them. `request` reaches IPC, built after them.
 */
export async function openAutomationAndManager(
  identity: ServerIdentity,
  data: { db: Store; authorize: Authorizer; secrets: SecretKeyring },
  events: ServerEmitter,
  request: (envelope: unknown, timeoutMs?: number) => Promise<RequestResult>,
  connection: ManagerConnection,
): Promise<{ automation: Automation; managed: ManagerServices; local: LocalProvider }> {
  const local = openLocalProvider(identity);
  const automation = openAutomation({
    db: data.db,
    log: identity.log,
    secrets: data.secrets,
    request: (envelope, options) => request(envelope, options?.timeoutMs),
    on: (event, listener) => events.on(event, listener),
    authorize: data.authorize,
    builtinProviders: { local },
    egress: identity.config.egress,
  });
  return { automation, managed: await openManager(identity, data, automation, connection), local };
}

/** The built-in `local` provider (SPEC 13.4) of this process, answered for the platform organization only. */
export function openLocalProvider(identity: ServerIdentity): LocalProvider {
  const { localRoot: root, localConfig: baseConfig } = identity.config.manager;
  return new LocalProvider({ log: identity.log.child({ component: 'local-provider' }), ...(root ? { root } : {}), ...(baseConfig ? { baseConfig } : {}) });
}

/**
 * SPEC 13: `server.manager` with the connection the primary resolved, over the store, the authorizer's platform
 * organization and the provider path.
 */
export async function openManager(identity: ServerIdentity, data: { db: Store; authorize: Authorizer }, automation: Automation, connection: ManagerConnection): Promise<ManagerServices> {
  return createManagerServices({
    serverId: identity.id,
    config: identity.config,
    store: data.db,
    platformOrganization: await data.authorize.directory.platformOrganization(),
    api: automation.providers,
    apiHttp: (envelope, options) => automation.api.send(envelope, options),
    workflows: automation.workflow,
    log: identity.log.child({ component: 'manager' }),
    clock: systemClock,
    connection,
  });
}

/**
 * In the primary of a server that manages a fleet: the keys it gave servers before keys carried their cluster
 * are bound to it now (once per start, not in every worker). A failure is logged; those keys stay bound through
 * their server's record, as before.
 */
export async function bindParentKeys(identity: ServerIdentity, data: { db: Store; authorize: Authorizer }): Promise<void> {
  const log = identity.log.child({ component: 'manager' });
  try {
    const platform = await data.authorize.directory.platformOrganization();
    const bound = platform ? await bindIssuedKeys(data.db, platform) : 0;
    if (bound > 0) log.info({ bound }, 'server keys bound to their clusters');
  } catch (error) {
    log.warn({ reason: (error as Error).message }, 'binding server keys to their clusters failed');
  }
}

/**
 * SPEC 13.1 in the primary's boot: the parent connection from config, else from this server's inventory record
 * (the key sealed there); one warning when a manager is named without a usable key. A key config gave is kept
 * in the record, sealed, for the next start; failing to keep it is a warning, not a failed start.
 */
export async function openManagerConnection(config: ServerIdentity['config'], serverId: string, data: { db: Store; authorize: Authorizer; secrets: SecretKeyring }, log: ServerIdentity['log']): Promise<ManagerConnection> {
  const managerLog = log.child({ component: 'manager' });
  const connection = await resolveConnection(config.manager, data.db, serverId, { secrets: data.secrets, log: managerLog });
  if (connection.apiKey && config.manager.apiKey) {
    try {
      await persistConnection(data.db, serverId, await data.authorize.directory.platformOrganization(), connection, data.secrets);
    } catch (error) {
      // The code only: a store's message may quote what was written.
      managerLog.warn({ code: (error as { code?: unknown }).code ?? 'error' }, "the manager's key could not be kept in this server's inventory record");
    }
  }
  return connection;
}
