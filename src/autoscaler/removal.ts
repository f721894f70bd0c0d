import type { Store } from '../db/types.js';
import { serverStatus } from '../inventory/servers.js';
import { IpcError, type DeliveredEnvelope } from '../ipc/envelope.js';
import { runHostCommand } from '../state/host-control.js';

export const REMOVAL_METHOD = 'autoscaler.remove';

export interface RemovalDeps {
  serverId: string;
  db: Store;
  /** The operator's opt-in: `autoscaler.powerOffOnRemoval` (which needs `lifecycle.hostControl`) and the command. */
  powerOff: { enabled: boolean; command: string[] };
  /** The primary's graceful stop: readiness grace, drain, shutdown hooks (routing removal), stopped hooks (git checkpoints). */
  stop(reason: string): Promise<void>;
  exit(code: number): void;
  log: {
    info(fields: Record<string, unknown>, message: string): void;
    error(fields: Record<string, unknown>, message: string): void;
  };
  runCommand?: typeof runHostCommand;
}

/**
 * `autoscaler.remove`, the last step of a scale-in (SPEC 14.4), answered by the primary of the removed server:
 * it stops this Fleetplane server gracefully and exits 0, and powers the host off afterwards only when the
 * operator opted in. Server-level (SPEC 8.4: a platform key holding the method, or the deciding server over the
 * mesh), and it must name this server in `confirm` and find this server's own inventory record `terminating`
 * (the autoscaler commits that before its provider request), so neither a broadcast nor a running server is
 * stopped by it. The caller is answered first: no reply could come back after the stop.
 */
export function removalHandler(deps: RemovalDeps): (data: unknown, envelope: DeliveredEnvelope) => Promise<unknown> {
  let removing = false;
  return async (_data, envelope) => {
    if (envelope.confirm !== deps.serverId) throw new IpcError('bad_request', `confirm must be this server's id ("${deps.serverId}")`, 'confirm');
    const status = await serverStatus(deps.db, deps.serverId);
    if (status !== 'terminating') {
      throw new IpcError('bad_request', `this server's inventory record is ${typeof status === 'string' ? status : 'missing'}, not terminating: only a server its cluster is removing stops this way`);
    }
    const powerOff = deps.powerOff.enabled;
    if (!removing) {
      removing = true;
      setImmediate(() => void stopAndExit(deps, powerOff));
    }
    return { removing: true, powerOff };
  };
}

async function stopAndExit(deps: RemovalDeps, powerOff: boolean): Promise<void> {
  deps.log.info({ powerOff }, powerOff ? 'removed from the cluster: stopping gracefully, then powering the host off' : 'removed from the cluster: stopping gracefully');
  // `shutdown`, as a signal's stop: mesh links close as gone for good (1000), routing is withdrawn with it.
  await deps.stop('shutdown');
  if (!powerOff) return deps.exit(0);
  const outcome = await (deps.runCommand ?? runHostCommand)(deps.powerOff.command);
  if (outcome.code !== 0) deps.log.error({ code: outcome.code, stderr: outcome.stderr }, 'the power-off command failed');
  else deps.log.info({ command: deps.powerOff.command[0] }, 'the power-off command ran');
  deps.exit(outcome.code === 0 ? 0 : 1);
}
