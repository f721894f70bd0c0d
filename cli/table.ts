/** Columns padded to their widest cell (numbers right-aligned), two spaces apart, a header row first. */
export function table(header: string[], rows: string[][], rightAligned: ReadonlySet<number> = new Set()): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
