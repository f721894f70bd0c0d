import { Type } from '@sinclair/typebox';
import type { ResolvedConfig } from '../config/schema.js';
import { ConfigError } from '../config/errors.js';
import { IpcError } from '../ipc/envelope.js';
import type { Logger } from '../logging/logger.js';
import type { PrimaryRuntime } from '../runtime/primary.js';
import type { WorkerRuntime } from '../runtime/worker.js';
import { lazyCheck } from '../schema/lazy-check.js';
import { HttpsIdentity } from '../tls/https-identity.js';
import { TlsMaterialError, readPem, type MutualTls, type TlsPair } from '../tls/material.js';
import { TlsReloader, type TlsFiles } from '../tls/reloader.js';

const CURRENT_PAIR = 'primary.tls.https';
const NEW_PAIR = 'worker.tls.https';
const PairMessage = lazyCheck(Type.Object({ key: Type.String({ minLength: 1 }), cert: Type.String({ minLength: 1 }) }, { additionalProperties: false }));

export interface PrimaryTlsDeps {
  config: ResolvedConfig;
  log: Logger;
  primary: PrimaryRuntime;
  /** The mesh, when its mutual-TLS material comes from files. */
  mesh?: { setTls(material: MutualTls): void };
  handle(method: string, handler: (data: unknown) => unknown): void;
}

/** The configured certificate files, per use. */
export function tlsFiles(config: ResolvedConfig): TlsFiles {
  const { https, mesh } = config;
  return {
    ...(https.key && https.cert ? { https: { key: https.key, cert: https.cert } } : {}),
    ...(mesh.enabled && mesh.tls.key && mesh.tls.cert && mesh.tls.ca ? { mesh: { key: mesh.tls.key, cert: mesh.tls.cert, ca: mesh.tls.ca } } : {}),
  };
}

/**
 * The primary's certificates: its HTTPS identity (the fallback's server presents it; workers are given it at
 * boot and on every reload), the `tls.reload` control method, and the watch of the certificate files. A start
 * with files that cannot serve fails with the reason.
 */
export function openPrimaryTls(deps: PrimaryTlsDeps): { https?: HttpsIdentity; close(): void } {
  const { config, log, primary } = deps;
  const files = tlsFiles(config);
  let https: HttpsIdentity | undefined;
  if (files.https) {
    try {
      https = new HttpsIdentity({ key: readPem(files.https.key, 'https.key'), cert: readPem(files.https.cert, 'https.cert') });
    } catch (error) {
      if (error instanceof TlsMaterialError) throw new ConfigError('https', error.message);
      throw error;
    }
    if (primary.fallback.https) https.serve(primary.fallback.https);
    const identity = https;
    primary.handleWorkerRpc(CURRENT_PAIR, () => identity.pair);
  }
  const tlsLog = log.child({ component: 'tls' });
  const reloader = new TlsReloader({ files, https, mesh: files.mesh ? deps.mesh : undefined, log: tlsLog, toWorkers: (pair) => toWorkers(primary, pair, tlsLog) });
  deps.handle('tls.reload', async () => {
    if (!files.https && !files.mesh) throw new IpcError('bad_request', 'no certificate files are configured (https.key and https.cert, or mesh.tls)');
    try {
      return await reloader.reload('request');
    } catch (error) {
      if (error instanceof TlsMaterialError) throw new IpcError('bad_request', `${error.message}: the certificates in use are kept`);
      throw error;
    }
  });
  reloader.watch();
  primary.onShutdown(() => reloader.close());
  return { https, close: () => reloader.close() };
}

/** Gives every worker the new pair; a worker that cannot take it is logged (it keeps its pair until it is replaced). */
async function toWorkers(primary: PrimaryRuntime, pair: TlsPair, log: Logger): Promise<number> {
  const records = primary.workers;
  const results = await Promise.allSettled(records.map((record) => record.rpc.call(NEW_PAIR, pair, 10_000)));
  results.forEach((result, index) => {
    if (result.status === 'rejected') log.warn({ targetWorker: records[index]!.slot, reason: (result.reason as Error).message }, 'a worker did not take the new HTTPS certificate');
  });
  return results.filter((result) => result.status === 'fulfilled').length;
}

/**
 * A worker's HTTPS identity: asked of the primary before the worker reports ready (never read from the files,
 * which may have changed since the primary checked them), and swapped when the primary reloads.
 */
export function workerHttps(config: ResolvedConfig, runtime: WorkerRuntime): HttpsIdentity | undefined {
  if (!tlsFiles(config).https) return undefined;
  const identity = new HttpsIdentity();
  const accept = (pair: unknown) => {
    if (!PairMessage.Check(pair)) throw new Error('an HTTPS pair is { key, cert }');
    return identity.accept(pair);
  };
  runtime.rpc.handle(NEW_PAIR, accept);
  runtime.beforeReady(async () => void accept(await runtime.rpc.call(CURRENT_PAIR, undefined, 10_000)));
  return identity;
}
