// Memory of idle fixture processes, with a breakdown (see bench/fixtures/memory-probe.cjs): V8 heap used and
// total, external and array buffers, code space, and the code each process has loaded, by package.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { fixturePath } from './procs.mjs';

const MiB = 1024 * 1024;
const mib = (bytes) => (bytes === null || bytes === undefined ? null : Math.round((bytes / MiB) * 10) / 10);
const kib = (bytes) => Math.round(bytes / 1024);

/** Environment that preloads the probe into a fixture and all the processes it forks. */
export function memoryProbeEnv(dir) {
  mkdirSync(dir, { recursive: true });
  const preload = `--require ${JSON.stringify(fixturePath('memory-probe.cjs'))}`;
  return { BENCH_MEMORY_DIR: dir, NODE_OPTIONS: [process.env.NODE_OPTIONS, preload].filter(Boolean).join(' ') };
}

/** Asks each process for its snapshot (SIGURG) and waits until the file is there. */
export async function memorySnapshots(dir, pids, timeoutMs = 10_000) {
  for (const pid of pids) process.kill(pid, 'SIGURG');
  const deadline = Date.now() + timeoutMs;
  const snapshots = [];
  for (const pid of pids) {
    const file = `${dir}/${pid}.json`;
    while (!existsSync(file)) {
      if (Date.now() > deadline) throw new Error(`no memory snapshot from process ${pid} within ${timeoutMs} ms`);
      await delay(20);
    }
    snapshots.push(JSON.parse(readFileSync(file, 'utf8')));
  }
  return snapshots;
}

/** The figures of one snapshot, in MiB and KiB, with the `top` owners of loaded code by source size. */
export function summarizeSnapshot(snapshot, top = 14) {
  if (snapshot.error) return { pid: snapshot.pid, error: snapshot.error };
  const { memory, modules, heapSpaces } = snapshot;
  const sumOf = (test) => kib(modules.byOwner.filter((entry) => test(entry.owner)).reduce((sum, entry) => sum + entry.sourceChars, 0));
  return {
    pid: snapshot.pid,
    role: snapshot.role,
    rssMiB: mib(memory.rss),
    heapUsedMiB: mib(memory.heapUsed),
    heapTotalMiB: mib(memory.heapTotal),
    codeSpaceMiB: mib(memory.codeSpaceBytes),
    // Reserved but mostly empty after boot: the young generation's semispaces, and old space grown during boot.
    newSpaceMiB: mib(heapSpaces.new_space?.sizeBytes),
    oldSpaceMiB: `${mib(heapSpaces.old_space?.usedBytes)} / ${mib(heapSpaces.old_space?.sizeBytes)}`,
    externalMiB: mib(memory.external),
    arrayBuffersMiB: mib(memory.arrayBuffers),
    mallocedMiB: mib(memory.mallocedBytes),
    // What RSS holds beyond the V8 heap and external memory: Node and the binary's resident pages, native
    // addons (SQLite), thread stacks, allocator slack.
    otherMiB: mib(memory.rss - memory.heapTotal - memory.external),
    modules: {
      scripts: modules.scripts,
      files: modules.files,
      fileKiB: kib(modules.fileBytes),
      sourceKiB: kib(modules.sourceChars),
      nodeBuiltins: modules.nodeBuiltins,
      nodeBindings: modules.nodeBindings,
      fleetplaneKiB: sumOf((owner) => owner.startsWith('fleetplane ')),
      packagesKiB: sumOf((owner) => !owner.startsWith('fleetplane ') && !owner.startsWith('node:') && !owner.startsWith('generated') && !owner.startsWith('other')),
      generatedKiB: sumOf((owner) => owner.startsWith('generated')),
      top: modules.byOwner.slice(0, top).map((entry) => ({ owner: entry.owner, scripts: entry.scripts, sourceKiB: kib(entry.sourceChars) })),
      byOwner: modules.byOwner.map((entry) => ({ owner: entry.owner, scripts: entry.scripts, sourceKiB: kib(entry.sourceChars), fileKiB: kib(entry.fileBytes) })),
    },
  };
}

/** Markdown table: one row per process. */
export function memoryMarkdown(rows) {
  const fmt = (value) => (value === null || value === undefined ? '–' : String(value));
  const lines = [
    '| process | RSS | heap used / total | new space (reserved) | old space used / size | code space | external (array buffers) | other native | scripts (files, KiB on disk) | source KiB: fleetplane / packages / generated | Node built-ins | largest loaded code, KiB of source (scripts) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const { label, summary: s } of rows) {
    if (s.error) {
      lines.push(`| ${label} | ${s.error} | | | | | | | | | | |`);
      continue;
    }
    const top = s.modules.top.map((entry) => `${entry.owner} ${entry.sourceKiB} (${entry.scripts})`).join('; ');
    lines.push(
      `| ${label} | ${fmt(s.rssMiB)} | ${fmt(s.heapUsedMiB)} / ${fmt(s.heapTotalMiB)} | ${fmt(s.newSpaceMiB)} | ${s.oldSpaceMiB} | ${fmt(s.codeSpaceMiB)} | ${fmt(s.externalMiB)} (${fmt(s.arrayBuffersMiB)}) | ${fmt(s.otherMiB)} | ${s.modules.scripts} (${s.modules.files}, ${s.modules.fileKiB}) | ${s.modules.fleetplaneKiB} / ${s.modules.packagesKiB} / ${s.modules.generatedKiB} | ${s.modules.nodeBuiltins} | ${top} |`,
    );
  }
  return lines.join('\n');
}
