import net from 'node:net';
import os from 'node:os';
import { cgroupCpuLimit, resolveWorkerCount } from '../config/sizing.js';

/** What this platform offers a Fleetplane server, as measured in this process. */
export interface PlatformCapabilities {
  /** `process.platform` (`linux`, `darwin`, `win32`...). */
  platform: NodeJS.Platform;
  /** `process.arch` (`x64`, `arm64`...). */
  arch: string;
  /** Version of the running Node.js, without the `v` (`20.19.0`). */
  nodeVersion: string;
  /** CPUs this process may use: `os.availableParallelism()` (affinity masks included), at least 1. */
  cpus: number;
  /** CPU quota of this process's cgroup (v2 `cpu.max` or v1 CFS quota), e.g. `1.5`; null when there is none. */
  cgroupCpuLimit: number | null;
  /** What `workers: 'auto'` resolves to here: WEB_CONCURRENCY when valid, else min(cpus, cgroup limit), at least 1. */
  autoWorkerCount: number;
  /**
   * Whether this Node on this kernel binds two listeners to one port with `listen({ reusePort: true })`
   * (SO_REUSEPORT; Node ≥ 22.12 / 23.1 on Linux and the BSDs). Probed by binding twice on 127.0.0.1; Node
   * versions that ignore the option fail the second bind, so on Node 20 this is false.
   */
  reusePort: boolean;
  /**
   * How connections reach workers: always `'primary hand-off'` (SPEC 1.2) — the primary accepts each
   * connection and passes it to a ready worker, so cordon, drain and the fallback behave the same on every
   * platform whether or not SO_REUSEPORT exists.
   */
  connectionDistribution: 'primary hand-off';
}

let reusePortProbe: Promise<boolean> | undefined;

/** SO_REUSEPORT through Node's `reusePort` listen option; probed once per process. */
export function supportsReusePort(): Promise<boolean> {
  reusePortProbe ??= probeReusePort();
  return reusePortProbe;
}

/**
 * Binds a second listener to the port of a first, both with `reusePort`. `exclusive` keeps the probe off
 * the cluster's shared handles when it runs in a worker. Any failure (an unsupported platform throws,
 * an older Node ignores the option and the second bind gets EADDRINUSE, no loopback) means no.
 */
export async function probeReusePort(host = '127.0.0.1'): Promise<boolean> {
  const first = net.createServer();
  const second = net.createServer();
  const listen = (server: net.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      try {
        server.listen({ port, host, exclusive: true, reusePort: true } as net.ListenOptions, () => resolve((server.address() as net.AddressInfo).port));
      } catch (error) {
        reject(error);
      }
    });
  const close = (server: net.Server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  try {
    const port = await listen(first, 0);
    await listen(second, port);
    return true;
  } catch {
    return false;
  } finally {
    await Promise.all([close(first), close(second)]);
  }
}

/** SPEC 1.4: the platform summary behind `Fleetplane.getCapabilities()`. */
export async function getCapabilities(env: NodeJS.ProcessEnv = process.env): Promise<PlatformCapabilities> {
  const cpus = os.availableParallelism();
  const limit = cgroupCpuLimit();
  return {
    platform: process.platform,
    arch: process.arch,
    nodeVersion: process.versions.node,
    cpus,
    cgroupCpuLimit: limit ?? null,
    autoWorkerCount: resolveWorkerCount('auto', env, cpus, limit).count,
    reusePort: await supportsReusePort(),
    connectionDistribution: 'primary hand-off',
  };
}
