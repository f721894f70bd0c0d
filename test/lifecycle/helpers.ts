import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openStore } from '../../src/db/open.js';
import type { Store } from '../../src/db/types.js';

export interface LogLine {
  level: 'info' | 'warn' | 'error';
  details: Record<string, unknown>;
  message: string;
}

/** A logger port that keeps every line, for assertions on what was (and was not) logged. */
export function memoryLog() {
  const lines: LogLine[] = [];
  const at = (level: LogLine['level']) => (details: Record<string, unknown>, message: string) => void lines.push({ level, details, message });
  return { lines, info: at('info'), warn: at('warn'), error: at('error'), text: () => JSON.stringify(lines) };
}

export const tempDir = (prefix = 'fleetplane-lifecycle-') => mkdtempSync(path.join(tmpdir(), prefix));

/** An embedded store in a fresh directory (or the one given, to share it), with the standard indexes. */
export async function openTempStore(dataDir = tempDir()): Promise<{ store: Store; dataDir: string }> {
  const store = await openStore({ dataDir, db: {}, mongodb: { database: 'fleetplane' } });
  return { store, dataDir };
}
