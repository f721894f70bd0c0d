#!/usr/bin/env node
// Runs every benchmark of this directory (bench/*.mjs except this file) one after the other, in name order.
// `npm run bench` builds first. Arguments are names to run only those: `node bench/run.mjs runtime`.
// The comparisons of two builds (compare-builds, rolling-restart) take an older tree as argument and are run
// by hand: `node bench/compare-builds.mjs <old-tree>`; so is envelope-perf, which needs Linux perf and taskset.
// Exit code: 0 when every benchmark exited 0, else 1 (the others still run).
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const self = path.basename(fileURLToPath(import.meta.url));
/** Run only when named: they take an older tree, or tools not every machine has. */
const BY_HAND = new Set(['compare-builds.mjs', 'rolling-restart.mjs', 'envelope-perf.mjs']);
const only = process.argv.slice(2).map((name) => name.replace(/\.mjs$/, ''));
const benches = readdirSync(here)
  .filter((file) => file.endsWith('.mjs') && file !== self)
  .filter((file) => (only.length === 0 ? !BY_HAND.has(file) : only.includes(file.replace(/\.mjs$/, ''))))
  .sort();

if (benches.length === 0) {
  console.error(`no benchmark to run${only.length ? ` matching ${only.join(', ')}` : ''}`);
  process.exit(1);
}

let current;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    // Pass it on: each benchmark cleans up its own processes on SIGINT / SIGTERM.
    current?.kill(signal);
    process.exit(130);
  });
}

const failed = [];
for (const file of benches) {
  const started = performance.now();
  console.error(`\n=== bench/${file}`);
  const code = await new Promise((resolve) => {
    current = spawn(process.execPath, [path.join(here, file)], { stdio: 'inherit', cwd: path.dirname(here) });
    current.on('error', (error) => {
      console.error(error);
      resolve(1);
    });
    current.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0)));
  });
  current = undefined;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.error(`=== bench/${file}: ${code === 0 ? 'done' : `failed (exit ${code})`} in ${seconds} s`);
  if (code !== 0) failed.push(file);
}
if (failed.length) {
  console.error(`\nfailed: ${failed.join(', ')}`);
  process.exitCode = 1;
}
