import type { Store } from '../db/types.js';
import { IpcError } from '../ipc/envelope.js';
import { clearUploadReservations, listUploadReservations, type UploadReservation } from './reservations.js';

export interface ReservationControlDeps {
  store: Pick<Store, 'collection'>;
  /**
   * The platform organization, looked up at each call as every platform-only feature does: the first `start`
   * creates it only once the server runs, after the boot that registered these methods.
   */
  platformOrganization(): Promise<string | null>;
  clusterId: string;
}

type Handle = (method: string, handler: (data: unknown) => unknown) => void;

const NO_PLATFORM = 'this server has no platform organization yet: the first start creates one once it serves, or run fleetplane init';

/**
 * SPEC 14.3 reconciliation through `fleetplane ctl` (server-level methods, platform keys only):
 * `repository.reservations` lists the upload reservations of this cluster, `repository.reservations.clear`
 * removes one (`{ "url": ... }`) or, with `{ "all": true }`, every one, after an operator checked the upload.
 */
export function registerReservationControl(handle: Handle, deps: ReservationControlDeps): void {
  const platform = async (): Promise<string> => {
    const organizationId = await deps.platformOrganization();
    if (!organizationId) throw new IpcError('unavailable', NO_PLATFORM);
    return organizationId;
  };
  handle('repository.reservations', async (): Promise<{ reservations: UploadReservation[] }> => ({
    reservations: await listUploadReservations(deps.store, await platform(), deps.clusterId),
  }));
  handle('repository.reservations.clear', async (data) => {
    const request = typeof data === 'object' && data !== null ? (data as { url?: unknown; all?: unknown }) : {};
    if (typeof request.url === 'string' && request.url.length > 0) return { cleared: await clearUploadReservations(deps.store, await platform(), deps.clusterId, request.url) };
    if (request.all === true) return { cleared: await clearUploadReservations(deps.store, await platform(), deps.clusterId) };
    throw new IpcError('bad_request', 'data must be { "url": "<repository URL>" } or { "all": true }', 'data');
  });
}
