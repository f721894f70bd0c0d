import type { Store } from '../db/types.js';
import { IpcError } from '../ipc/envelope.js';
import { clearUploadReservations, listUploadReservations, type UploadReservation } from './reservations.js';

export interface ReservationControlDeps {
  store: Pick<Store, 'collection'>;
  organizationId: string;
  clusterId: string;
}

type Handle = (method: string, handler: (data: unknown) => unknown) => void;

/**
 * SPEC 14.3 reconciliation through `fleetplane ctl` (server-level methods, platform keys only):
 * `repository.reservations` lists the upload reservations of this cluster, `repository.reservations.clear`
 * removes one (`{ "url": ... }`) or, with `{ "all": true }`, every one, after an operator checked the upload.
 */
export function registerReservationControl(handle: Handle, deps: ReservationControlDeps): void {
  handle('repository.reservations', async (): Promise<{ reservations: UploadReservation[] }> => ({
    reservations: await listUploadReservations(deps.store, deps.organizationId, deps.clusterId),
  }));
  handle('repository.reservations.clear', async (data) => {
    const request = typeof data === 'object' && data !== null ? (data as { url?: unknown; all?: unknown }) : {};
    if (typeof request.url === 'string' && request.url.length > 0) return { cleared: await clearUploadReservations(deps.store, deps.organizationId, deps.clusterId, request.url) };
    if (request.all === true) return { cleared: await clearUploadReservations(deps.store, deps.organizationId, deps.clusterId) };
    throw new IpcError('bad_request', 'data must be { "url": "<repository URL>" } or { "all": true }', 'data');
  });
}
