import { createLogger } from '../logging/logger.js';
import { serverEvents } from '../runtime/events.js';
import { WorkerRuntime } from '../runtime/worker.js';
import { WorkerFacade } from '../runtime/process-facade.js';
import { StorageReplica } from '../storage/index.js';
import { Server, type ServerIdentity } from '../server.js';
import { openKeyring, openServerData } from './data.js';
import { FAILURE_REPORT_METHOD } from '../auth/failure-limit.js';
import { workerIpc, workerState } from './ipc.js';
import { workerMesh } from './mesh.js';
import { workerOverview } from './overview.js';
import { workerHttps } from './tls.js';
import { openAutomationAndManager } from './manager.js';
import { INTERNAL_ENV, type InitOptions } from './options.js';
import { isInternalMessage, type PrimaryToWorker, type WorkerBoot, type WorkerToPrimary } from '../runtime/messages.js';

/**
 * A worker's boot: the resolved config, identity and total from the primary; the same keys and store; the
 * runtime; storage replica, IPC client, state and automation; the server object; then the app it serves.
 */
export async function bootWorker(env: NodeJS.ProcessEnv, options: InitOptions): Promise<Server> {
  const { config: resolved, manager: managerConnection } = await bootFromPrimary();
  const workerId = Number(env[INTERNAL_ENV.worker]);
  const serverId = env[INTERNAL_ENV.serverId]!;
  // The primary decided the format for its terminal (its `auto` is never passed on).
  const log = createLogger({ level: resolved.log.level, base: { server: serverId, worker: workerId }, destination: options.logDestination, format: resolved.log.format === 'pretty' ? 'pretty' : 'json' });
  const identity: ServerIdentity = { id: serverId, workerId, config: resolved, log };
  // The same environment and key file as the primary's: the key itself never travels in the config.
  const secrets = openKeyring(resolved, env);
  const events = serverEvents(log);
  const runtime = new WorkerRuntime(resolved, workerId, log, events);
  // Failed authentications are counted by the primary, so a client address has one allowance per server.
  const failureLedger = { fail: (address: string) => runtime.rpc.call(FAILURE_REPORT_METHOD, { address }, 2_000) };
  const data = await openServerData(resolved, log, secrets, { sealAtStart: false, failureLedger });
  const facade = new WorkerFacade(runtime, Number(env[INTERNAL_ENV.total]));
  const storage = new StorageReplica(runtime, log.child({ component: 'storage' }));
  const ipc = workerIpc({ identity, events, authorize: data.authorize }, runtime);
  const { automation, managed } = await openAutomationAndManager(identity, { ...data, secrets }, events, ipc.envelopes.request, managerConnection);
  // State mirrors its saves through the manager.
  const state = workerState({ identity, events, authorize: data.authorize, facade, db: data.db, storage, manager: managed.manager }, runtime, ipc);
  workerOverview(ipc.envelopes.handle, runtime);
  const server = new Server(identity, events, facade, { ...data, storage, envelopes: ipc.envelopes, organizations: ipc.organizations, state, automation, mesh: workerMesh(runtime), manager: managed.manager, https: workerHttps(resolved, runtime) });
  runtime.onStopped(async () => {
    await managed.close();
    await data.db.close();
  });
  await runtime.bind();
  runtime.attach(await options.app(server));
  return server;
}

/**
 * The resolved config and the manager's connection, asked of the primary over IPC as the worker's first
 * message. They are never put in the worker's environment, which other processes of the same user can read
 * (`/proc/<pid>/environ`).
 */
function bootFromPrimary(): Promise<WorkerBoot> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: unknown) => {
      if (!isInternalMessage(message) || message.fp !== 'boot') return;
      done();
      const { config, manager } = message as Extract<PrimaryToWorker, { fp: 'boot' }>;
      resolve({ config, manager });
    };
    const onDisconnect = () => {
      done();
      reject(new Error('the primary went away before sending the config'));
    };
    const done = () => {
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
    };
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
    process.send!({ fp: 'boot' } satisfies WorkerToPrimary);
  });
}
