import { existsSync, readFileSync } from 'node:fs';

/**
 * The lines another process has finished appending to a JSON-lines file, parsed; none while it does not exist.
 * Read while that process writes: a file just created is empty and a line being written has no newline yet, so
 * only what ends in a newline counts.
 */
export function finishedJsonLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line) as T);
}
