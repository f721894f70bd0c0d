import type { Store } from '../db/types.js';
import type { SecretOpener } from '../secrets/keyring.js';

/** Workers (and the upload command) find the node credential here; the primary sets it, nobody logs it. */
export const NODE_CREDENTIAL_ENV = 'FLEETPLANE_NODE_CREDENTIAL';

export interface NodeCredentialDeps {
  store: Pick<Store, 'collection'>;
  organizationId: string;
  /** Opens a sealed value; without it only a plaintext value is usable. */
  secrets?: SecretOpener;
  log: { warn(details: Record<string, unknown>, message: string): void };
}

/** `admin` as stored by hand or by older tools: true, "true", 1, "1". */
export const isAdminFlag = (value: unknown): boolean => value === true || value === 1 || (typeof value === 'string' && ['true', '1'].includes(value.trim().toLowerCase()));

/**
 * SPEC 14.2: the first (by id) `servers_config` record of the platform organization with `type: "key"`, an
 * admin flag and a `key` value: the credential this node's own tools (the initial upload) act with. None →
 * undefined, nothing is generated. A read failure is one generic diagnostic, never the value or the store's
 * message (which could quote a document), and the server still starts.
 */
export async function loadNodeCredential(deps: NodeCredentialDeps): Promise<string | undefined> {
  try {
    const records = await deps.store.collection('servers_config').find({ organization_id: deps.organizationId, type: 'key' }, { sort: { _id: 1 } });
    const record = records.find((candidate) => isAdminFlag(candidate.admin) && typeof candidate.key === 'string' && candidate.key.length > 0);
    if (!record) return undefined;
    const value = record.key as string;
    return deps.secrets ? deps.secrets.open(value, { organizationId: deps.organizationId, collection: 'servers_config', path: ['key'] }) : value;
  } catch (error) {
    deps.log.warn({ code: (error as { code?: unknown }).code ?? 'error' }, 'the node credential could not be loaded; the server starts without it');
    return undefined;
  }
}

/** The environment workers and node tools inherit: the credential when there is one, else nothing added. */
export const credentialEnvironment = (credential: string | undefined): Record<string, string> => (credential ? { [NODE_CREDENTIAL_ENV]: credential } : {});
