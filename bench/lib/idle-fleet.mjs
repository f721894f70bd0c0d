// Idle servers for bench/store.mjs: Fleetplane servers (a primary and one worker each) on one store, in one mesh
// (a shared secret), nothing asked of them; what each costs the store while idle, and its CPU. On PostgreSQL each
// server connects as a role of its own, so pg_stat_statements counts every server's statements and none of the
// measurer's. On the embedded store the servers share one SQLite file, and bench/fixtures/count-sqlite.cjs counts
// each process's statements.
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Fixture, cpuPreciseMs, fixturePath } from './procs.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const freePort = () =>
  new Promise((resolve, reject) => {
    const probe = net.createServer().once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });

export class IdleFleet {
  /** `postgres`: the benchmark's server (bench/lib/postgres.mjs), or `sqliteFile`: the shared embedded file. */
  constructor({ root, postgres, sqliteFile }) {
    this.backend = postgres ? 'postgres' : 'embedded';
    Object.assign(this, { root, postgres, sqliteFile });
    this.servers = [];
    this.countDir = path.join(root, 'sqlite-counts');
    this.secret = `idle-fleet-${this.backend}-${'s'.repeat(16)}`;
    this.sequence = 0;
    if (!postgres) mkdirSync(this.countDir, { recursive: true });
  }

  async config(index) {
    const common = {
      dataDir: mkdtempSync(path.join(this.root, `${this.backend}-${index}-`)),
      workers: 1,
      http: { port: 0, host: '127.0.0.1' },
      log: { level: 'warn', requests: false },
      mesh: { secret: this.secret, host: '127.0.0.1', port: await freePort() },
    };
    if (!this.postgres) return { ...common, db: { path: this.sqliteFile } };
    const role = `idle_server_${index}`;
    await this.postgres.query(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
    await this.postgres.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`);
    return { ...common, postgres: { url: this.postgres.url(role, role) } };
  }

  /** Starts servers until there are `count`, and waits until every one has its worker ready. */
  async grow(count) {
    const started = [];
    for (let index = this.servers.length + 1; index <= count; index += 1) {
      const env = { BENCH_FP_CONFIG: JSON.stringify(await this.config(index)) };
      if (!this.postgres) Object.assign(env, { BENCH_SQLITE_COUNT_DIR: this.countDir, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${fixturePath('count-sqlite.cjs')}`.trim() });
      const fixture = new Fixture('fleetplane.mjs', env);
      const server = { index, fixture, role: `idle_server_${index}` };
      this.servers.push(server);
      started.push(fixture.ready(120_000).then((info) => (server.pids = [info.pid, ...info.workers])));
    }
    await Promise.all(started);
  }

  /** Statements each server has made so far, by server index. */
  async statements() {
    if (this.postgres) {
      const { rows } = await this.postgres.query("SELECT r.rolname AS role, sum(s.calls)::bigint AS calls FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname LIKE 'idle_server_%' GROUP BY r.rolname");
      const byRole = new Map(rows.map((row) => [row.role, Number(row.calls)]));
      return this.servers.map((server) => byRole.get(server.role) ?? 0);
    }
    // Every process answers the trigger with its count (bench/fixtures/count-sqlite.cjs); asked again if one missed it.
    const sequence = String(++this.sequence);
    const answers = new Map();
    const pids = this.servers.flatMap((server) => server.pids);
    for (let attempt = 0; answers.size < pids.length; attempt += 1) {
      if (attempt % 200 === 0) {
        if (attempt >= 1_000) throw new Error(`${pids.length - answers.size} processes did not report their SQLite statements`);
        writeFileSync(path.join(this.countDir, 'trigger.tmp'), sequence);
        renameSync(path.join(this.countDir, 'trigger.tmp'), path.join(this.countDir, 'trigger'));
      }
      await sleep(10);
      for (const pid of pids) {
        try {
          const answer = JSON.parse(readFileSync(path.join(this.countDir, `${pid}.json`), 'utf8'));
          if (answer.sequence === sequence) answers.set(pid, answer.statements);
        } catch {
          // not answered yet
        }
      }
    }
    return this.servers.map((server) => server.pids.reduce((total, pid) => total + answers.get(pid), 0));
  }

  /** CPU each server's primary and worker have used so far (ms), by server index. */
  cpuMs() {
    return this.servers.map((server) => server.pids.reduce((total, pid) => total + (cpuPreciseMs(pid) ?? 0), 0));
  }

  stop() {
    return Promise.all(this.servers.map((server) => server.fixture.stop()));
  }
}

/**
 * One idle window over several fleets at once: per server, the statements per second it made and its CPU in ms
 * per second, between a reading at the start and one at the end.
 */
export async function measureIdle(fleets, windowMs) {
  const read = async () => Promise.all(fleets.map(async (fleet) => ({ statements: await fleet.statements(), cpuMs: fleet.cpuMs(), at: performance.now() })));
  const before = await read();
  await sleep(windowMs);
  const after = await read();
  return fleets.map((fleet, index) => {
    const seconds = (after[index].at - before[index].at) / 1000;
    const rate = (key) => after[index][key].map((value, server) => (value - before[index][key][server]) / seconds);
    return { backend: fleet.backend, servers: fleet.servers.length, windowS: +seconds.toFixed(2), statementsPerSecond: rate('statements'), cpuMsPerSecond: rate('cpuMs') };
  });
}
