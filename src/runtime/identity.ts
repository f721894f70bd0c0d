import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';

export const SERVER_ID_FILE = 'server-id';

/** The server's stable id: configured, else the one persisted in the data directory, else a new one saved there. */
export function resolveServerId(configured: string | undefined, dataDir: string): string {
  if (configured) return configured;
  const file = path.join(dataDir, SERVER_ID_FILE);
  try {
    const stored = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9._-]{1,128}$/.test(stored)) return stored;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dataDir, { recursive: true });
  const id = randomUUID();
  // `wx`: when two servers share a data directory and race here, the loser reads the winner's id.
  try {
    writeFileSync(file, `${id}\n`, { flag: 'wx', mode: 0o644 });
    return id;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return readFileSync(file, 'utf8').trim();
    throw error;
  }
}
