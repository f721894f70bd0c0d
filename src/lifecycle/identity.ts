import { hostname, networkInterfaces } from 'node:os';
import type { ResolvedConfig } from '../config/schema.js';
import { fetchInstanceMetadata, type InstanceMetadata } from './instance-metadata.js';

/** Where this node runs, as the routing workflow and the inventory see it (SPEC 14.1). */
export interface NodeIdentity {
  ip: { public?: string; private?: string };
  host: string;
  infrastructure: { provider?: string; region?: string; instanceId?: string };
  location?: string;
}

export interface IdentityDeps {
  /** Told when the metadata endpoint did not answer; the identity is then built from config alone. */
  warn(details: Record<string, unknown>, message: string): void;
  /** Interfaces of this host (os.networkInterfaces by default), for the private address. */
  interfaces?: () => ReturnType<typeof networkInterfaces>;
  osHostname?: () => string;
}

/** The first non-internal IPv4 address of the host: a private address is the host's own fact, not a guess. */
function firstPrivateIpv4(interfaces: ReturnType<typeof networkInterfaces>): string | undefined {
  for (const list of Object.values(interfaces)) {
    const found = list?.find((entry) => entry.family === 'IPv4' && !entry.internal);
    if (found) return found.address;
  }
  return undefined;
}

function hostOf(publicUrl: string | undefined): string | undefined {
  if (!publicUrl) return undefined;
  try {
    return new URL(publicUrl).hostname || undefined;
  } catch {
    return undefined;
  }
}

const defined = <T extends Record<string, unknown>>(value: T): T =>
  Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;

/**
 * Config first, then the instance metadata endpoint of the configured kind for what config leaves out. Only
 * the configured endpoint is asked: with `metadata.kind: none` the infrastructure is what config says, and
 * nothing more.
 */
export async function resolveNodeIdentity(config: Pick<ResolvedConfig, 'node' | 'server'>, deps: IdentityDeps): Promise<NodeIdentity> {
  const node = config.node;
  let metadata: InstanceMetadata = {};
  const complete = node.publicIp && node.privateIp && node.provider && node.region && node.instanceId && node.location;
  if (node.metadata.kind !== 'none' && !complete) {
    try {
      metadata = await fetchInstanceMetadata(node.metadata.kind, node.metadata.url, node.metadata.timeoutMs);
    } catch (error) {
      deps.warn({ kind: node.metadata.kind, reason: (error as Error).message }, 'the instance metadata endpoint did not answer; node identity from config only');
    }
  }
  const privateIp = node.privateIp ?? metadata.privateIp ?? firstPrivateIpv4((deps.interfaces ?? networkInterfaces)());
  const regionAndZone = [metadata.region, metadata.zone].filter(Boolean).join('/');
  return defined({
    ip: defined({ public: node.publicIp ?? metadata.publicIp, private: privateIp }),
    host: node.host ?? hostOf(config.server.publicUrl) ?? (deps.osHostname ?? hostname)(),
    infrastructure: defined({
      provider: node.provider ?? (node.metadata.kind === 'none' ? undefined : node.metadata.kind),
      region: node.region ?? metadata.region,
      instanceId: node.instanceId ?? metadata.instanceId,
    }),
    location: node.location ?? (regionAndZone || undefined),
  });
}
