import type { HandlerRegistry } from '../ipc/handlers.js';
import { IpcError, flagOf, type DeliveredEnvelope } from '../ipc/envelope.js';
import type { ServerState } from './state.js';
import type { ClusterStorage } from '../storage/index.js';
import { registerStorageEnvelopes } from '../storage/envelopes.js';

interface BuiltinDeps {
  readonly id: string;
  readonly workerId: number;
  readonly isPrimary: boolean;
  readonly state: ServerState;
  readonly storage: ClusterStorage;
  describe(): { worker: number; pid: number; status: string; uptimeMs: number; connections: number };
}

/** `cordon` / `drain` take `true`, `false`, or `{ value }` (or `value` beside `data`); no argument means `true`. */
function flag(data: unknown): boolean {
  const value = flagOf(data);
  if (value === undefined) throw new IpcError('bad_request', 'data must be true, false or { "value": boolean }', 'data');
  return value;
}

/**
 * `{ "value": true, "wait": true }`: answered once applied — after the readiness grace and, for a drain, once
 * the connections ended — as `server.state.cordon()` / `drain()` resolve, for a caller whose timeout outlasts
 * both (the autoscaler's drain before a scale-in). Without it the change is answered once accepted.
 */
function waitsForIt(data: unknown): boolean {
  const wait = typeof data === 'object' && data !== null ? (data as { wait?: unknown }).wait : undefined;
  if (wait !== undefined && typeof wait !== 'boolean') throw new IpcError('bad_request', 'data.wait must be true or false', 'data.wait');
  return wait === true;
}

/**
 * Whether the primary got the envelope as the primary (`master`, or a server named with nothing inside it),
 * not as the worker it also is in single-process mode (`worker: 0`, `broadcast`, an organization scope).
 */
const addressesPrimary = (envelope: DeliveredEnvelope): boolean =>
  envelope.master === true || (envelope.worker === undefined && envelope.broadcast !== true && envelope.organization_id === undefined);

const PRIMARY_ONLY = 'the primary answers it: address it with master: true (fleetplane ctl <method> --master)';

/**
 * Control methods whose subsystem may be off, with the setting that turns it on; in a worker, the methods the
 * primary alone answers. A registered handler wins: these answer only where the subsystem is absent.
 */
function explainAbsentMethods(handlers: HandlerRegistry, isPrimary: boolean): void {
  if (!isPrimary) {
    for (const namespace of ['autoscaler', 'repository']) handlers.explainAbsent(namespace, { code: 'wrong_target', message: PRIMARY_ONLY });
    return;
  }
  handlers.explainAbsent('autoscaler', {
    code: 'disabled',
    message: 'the autoscaler is off on this server (autoscaler.enabled is false): set autoscaler.enabled to true, or FLEETPLANE_AUTOSCALER_ENABLED=true, and restart it',
  });
  handlers.explainAbsent('socket', { code: 'wrong_target', message: 'the workers answer it, where the WebSockets are: address it with broadcast: true or organization_id' });
}

/** SPEC 5.4: the handlers every process answers. */
export function registerBuiltins(handlers: HandlerRegistry, deps: BuiltinDeps): void {
  explainAbsentMethods(handlers, deps.isPrimary);
  handlers.handle('status', () => ({ server: deps.id, ...deps.describe(), rssBytes: process.memoryUsage.rss() }));
  // Answered once accepted: one that waits for the readiness grace says so rather than answering after it.
  handlers.handle('cordon', (data) => (waitsForIt(data) ? deps.state.cordon(flag(data)) : deps.state.accept('cordon', flag(data))));
  handlers.handle('drain', (data) => (waitsForIt(data) ? deps.state.drain(flag(data)) : deps.state.accept('drain', flag(data))));
  handlers.handle('shed', (data) => {
    const organizations = data === false ? false : Array.isArray(data) ? data : (data as { organizations?: unknown })?.organizations;
    return deps.state.shed(organizations as string[] | false);
  });
  handlers.handle('restart', (data, envelope) => {
    const { isPrimary, handover } = (data ?? {}) as { isPrimary?: unknown; handover?: unknown };
    // `fleetplane upgrade`: answered once the new primary serves. `isPrimary`: stop, for the service manager.
    if (handover === true || isPrimary === true) return deps.state.restart({ isPrimary: isPrimary === true, handover: handover === true });
    // The design's `restart` of the primary restarts the server application: the hand-over, no downtime.
    if (deps.isPrimary && addressesPrimary(envelope)) return deps.state.restartPrimary();
    // Every worker of the server (no organization scope): one rolling restart, however many workers ask for it.
    if (envelope.broadcast === true && envelope.worker === undefined && envelope.organization_id === undefined) return deps.state.restartWorkers('restart envelope');
    return deps.state.restart();
  });
  handlers.handle('reboot', (_data, envelope) => deps.state.reboot(envelope.confirm));
  handlers.handle('shutdown', (_data, envelope) => deps.state.shutdown(envelope.confirm));

  registerStorageEnvelopes((method, handler) => handlers.handle(method, handler), deps.storage);
}
