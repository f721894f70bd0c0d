import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { cleanEnv, tempDir } from '../helpers/server-process.js';

const CONTENDER = path.resolve(import.meta.dirname, '..', 'fixtures', 'lease-contender.mjs');

interface Report {
  owner: string;
  /** [term, when the contender judged it held the lease] for every act. */
  acts: Array<[number, number]>;
  errors: number;
}

function contend(config: Record<string, unknown>): Promise<Report> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CONTENDER], { env: { ...cleanEnv(), CONTENDER: JSON.stringify(config) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`contender ${String(config.owner)} exited ${code}: ${stderr}`));
      resolve(JSON.parse(stdout) as Report);
    });
  });
}

t.test('processes racing for one lease on one embedded file: each term has one holder, and no two holders act at once', async (t) => {
  const file = path.join(tempDir('fleetplane-lease-race-'), 'shared.db');
  const owners = ['p1', 'p2', 'p3', 'p4'];
  const reports = await Promise.all(owners.map((owner, index) => contend({ file, name: 'decider:race', owner, ttlMs: 100, runMs: 6_000, seed: 17 + index * 7919 })));
  const holders = new Map<number, Set<string>>();
  const span = new Map<number, { first: number; last: number }>();
  for (const report of reports) {
    for (const [term, at] of report.acts) {
      holders.set(term, (holders.get(term) ?? new Set()).add(report.owner));
      const known = span.get(term);
      span.set(term, { first: Math.min(known?.first ?? at, at), last: Math.max(known?.last ?? at, at) });
    }
  }
  const terms = [...span.keys()].sort((a, b) => a - b);
  t.ok(terms.length >= 3, `the lease changed hands ${terms.length - 1} times among ${reports.filter((report) => report.acts.length > 0).length} processes`);
  for (const [term, owner] of holders) t.equal(owner.size, 1, `term ${term} has one holder: ${[...owner].join(', ')}`);
  for (let index = 1; index < terms.length; index++) {
    const before = span.get(terms[index - 1]!)!;
    const after = span.get(terms[index]!)!;
    t.ok(before.last < after.first, `every act of term ${terms[index - 1]} came before the first of term ${terms[index]}`);
  }
  t.comment(`acts: ${reports.map((report) => `${report.owner} ${report.acts.length}`).join(', ')}; store errors: ${reports.reduce((sum, report) => sum + report.errors, 0)}`);
});
