import { createHash } from 'node:crypto';
import { DuplicateKeyError } from '../db/errors.js';
import type { Document, Store } from '../db/types.js';

export const RESERVATIONS = 'repository_upload_reservations';

export interface ReservationKey {
  organizationId: string;
  clusterId: string;
  url: string;
}

export interface UploadReservation {
  _id: string;
  organization_id: string;
  cluster_id: string;
  url: string;
  server_id: string;
  createdAt: string;
}

/** One id per cluster + URL, so two claimers collide on `_id` as well as on the unique index. */
export const reservationId = (key: ReservationKey) =>
  `upload_${createHash('sha256').update(JSON.stringify([key.organizationId, key.clusterId, key.url])).digest('hex').slice(0, 32)}`;

/**
 * Claims the initial upload of one repository for this server: true for exactly one of any number of
 * concurrent claimers (the store's unique index decides), false while any reservation exists.
 */
export async function claimUpload(store: Pick<Store, 'collection'>, key: ReservationKey, serverId: string, now: Date): Promise<boolean> {
  try {
    await store.collection(RESERVATIONS).insertOne({
      _id: reservationId(key),
      organization_id: key.organizationId,
      cluster_id: key.clusterId,
      url: key.url,
      server_id: serverId,
      createdAt: now.toISOString(),
    });
    return true;
  } catch (error) {
    if (error instanceof DuplicateKeyError) return false;
    throw error;
  }
}

/** Gives the claim back (a failed upload, or one completed and recorded): a later start may run it. */
export async function releaseUpload(store: Pick<Store, 'collection'>, key: ReservationKey, serverId: string): Promise<boolean> {
  const { deletedCount } = await store.collection(RESERVATIONS).deleteOne({ _id: reservationId(key), server_id: serverId });
  return deletedCount === 1;
}

/** Reservations left for reconciliation (a crash, or an upload whose completion could not be recorded). */
export async function listUploadReservations(store: Pick<Store, 'collection'>, organizationId: string, clusterId?: string): Promise<UploadReservation[]> {
  const filter: Record<string, unknown> = { organization_id: organizationId, ...(clusterId ? { cluster_id: clusterId } : {}) };
  const found = await store.collection<Document>(RESERVATIONS).find(filter, { sort: { createdAt: 1 } });
  return found as unknown as UploadReservation[];
}

/** Clears reservations after an operator checked the upload: one URL, or every one of the cluster. */
export async function clearUploadReservations(store: Pick<Store, 'collection'>, organizationId: string, clusterId: string, url?: string): Promise<number> {
  const filter = url ? { _id: reservationId({ organizationId, clusterId, url }) } : { organization_id: organizationId, cluster_id: clusterId };
  const { deletedCount } = await store.collection(RESERVATIONS).deleteMany(filter);
  return deletedCount;
}
