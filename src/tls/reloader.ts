import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { HttpsIdentity } from './https-identity.js';
import { checkPair, readPem, type CertificateFacts, type MutualTls, type TlsPair } from './material.js';

export interface TlsFiles {
  https?: { key: string; cert: string };
  mesh?: { key: string; cert: string; ca: string };
}

export interface TlsReloaderDeps {
  files: TlsFiles;
  /** This process's HTTPS certificate (the fallback's server, the control surface). */
  https?: HttpsIdentity;
  /** Gives every worker the new HTTPS pair; resolves with how many took it. */
  toWorkers(pair: TlsPair): Promise<number>;
  /** The mesh's mutual-TLS material, when it comes from files. */
  mesh?: { setTls(material: MutualTls): void };
  log: { info(details: object, message: string): void; warn(details: object, message: string): void };
  /** How long the files must stay unchanged before a change is loaded (default 300 ms). */
  settleMs?: number;
}

export interface ReloadReport {
  https?: CertificateFacts & { workers: number };
  mesh?: CertificateFacts;
}

/**
 * Reloads the configured certificates without a restart, on request (`tls.reload`) or when their files change.
 * Every file is read and checked first; only when all of them can serve is anything swapped, so a broken pair
 * (a key that is not the certificate's, a file that does not parse) changes nothing: one log line says why, the
 * certificates in use are kept, and the request that asked is refused with the reason.
 */
export class TlsReloader {
  private queue: Promise<unknown> = Promise.resolve();
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private loaded: { https?: TlsPair; mesh?: MutualTls } = {};

  constructor(private readonly deps: TlsReloaderDeps) {
    const { https } = deps;
    if (https) this.loaded.https = https.pair;
  }

  reload(trigger: 'request' | 'files' = 'request'): Promise<ReloadReport> {
    const run = this.queue.then(() => this.load(trigger));
    this.queue = run.catch(() => {});
    return run;
  }

  /** Watches the directories of the configured files: an editor's or a renewal tool's rename is seen too. */
  watch(): void {
    const names = new Map<string, Set<string>>();
    for (const file of [...Object.values(this.deps.files.https ?? {}), ...Object.values(this.deps.files.mesh ?? {})]) {
      const directory = path.dirname(path.resolve(file));
      names.set(directory, (names.get(directory) ?? new Set()).add(path.basename(file)));
    }
    for (const [directory, files] of names) {
      try {
        const watcher = watch(directory, (_event, name) => {
          if (name === null || files.has(String(name))) this.changed();
        });
        watcher.on('error', () => {});
        watcher.unref();
        this.watchers.push(watcher);
      } catch (error) {
        this.deps.log.warn({ directory, reason: (error as Error).message }, 'certificate files are not watched: reload them with "fleetplane ctl tls reload"');
      }
    }
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const watcher of this.watchers.splice(0)) watcher.close();
  }

  private changed(): void {
    if (this.timer) clearTimeout(this.timer);
    // A key and its certificate are written one after the other: wait until both are.
    this.timer = setTimeout(() => void this.reload('files').catch(() => {}), this.deps.settleMs ?? 300);
    this.timer.unref();
  }

  private async load(trigger: 'request' | 'files'): Promise<ReloadReport> {
    const { files, log } = this.deps;
    let https: TlsPair | undefined;
    let mesh: MutualTls | undefined;
    let facts: { https?: CertificateFacts; mesh?: CertificateFacts };
    try {
      https = files.https && { key: readPem(files.https.key, 'https.key'), cert: readPem(files.https.cert, 'https.cert') };
      mesh = files.mesh && readMesh(files.mesh);
      facts = {
        https: https && checkPair(https, { key: 'https.key', cert: 'https.cert' }),
        mesh: mesh && checkPair(mesh, { key: 'mesh.tls.key', cert: 'mesh.tls.cert', ca: 'mesh.tls.ca' }),
      };
    } catch (error) {
      log.warn({ trigger, reason: (error as Error).message }, 'TLS reload refused: the certificates in use are kept');
      throw error;
    }
    if (trigger === 'files' && same(https, this.loaded.https) && same(mesh, this.loaded.mesh)) return {};
    const report: ReloadReport = {};
    if (https && facts.https) {
      this.deps.https?.accept(https);
      report.https = { ...facts.https, workers: await this.deps.toWorkers(https) };
    }
    if (mesh && facts.mesh) {
      this.deps.mesh?.setTls(mesh);
      report.mesh = facts.mesh;
    }
    this.loaded = { https, mesh };
    log.info({ trigger, https: report.https?.serial, mesh: report.mesh?.serial }, 'TLS certificates reloaded');
    return report;
  }
}

function readMesh(files: { key: string; cert: string; ca: string }): MutualTls {
  return { key: readPem(files.key, 'mesh.tls.key'), cert: readPem(files.cert, 'mesh.tls.cert'), ca: readPem(files.ca, 'mesh.tls.ca') };
}

function same(a: (TlsPair & { ca?: string }) | undefined, b: (TlsPair & { ca?: string }) | undefined): boolean {
  return a?.key === b?.key && a?.cert === b?.cert && a?.ca === b?.ca;
}
