import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * `<data-dir>/primary.pid`: the pid of the primary serving this data directory, kept current across hand-overs
 * (SPEC 1.10) so a service manager that follows a PID file (systemd's `PIDFile=`) knows the new main process
 * before the old one exits.
 */
export const PID_FILE = 'primary.pid';

/** Written whole or not at all: a reader never sees a half-written pid. */
export function writePidFile(dataDir: string, pid = process.pid): void {
  const file = path.join(dataDir, PID_FILE);
  const own = `${file}.${pid}`;
  writeFileSync(own, `${pid}\n`, { mode: 0o644 });
  renameSync(own, file);
}

export function readPidFile(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dataDir, PID_FILE), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** At a graceful exit: removed only while it names this process (after a hand-over it names the new primary). */
export function removePidFile(dataDir: string, pid = process.pid): void {
  if (readPidFile(dataDir) !== pid) return;
  try {
    unlinkSync(path.join(dataDir, PID_FILE));
  } catch {
    // already gone
  }
}
