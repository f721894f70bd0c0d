import type { Store } from '../db/types.js';

/** The logger the lifecycle services write to (pino's signature: details first). */
export interface LifecycleLog {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
}

/** Where a lifecycle service acts: the store, and this node's platform organization, server and cluster. */
export interface NodeScope {
  store: Pick<Store, 'collection'>;
  /** The platform organization: it owns the cluster document, the servers_config records and the credentials. */
  organizationId: string;
  serverId: string;
  clusterId: string;
}
