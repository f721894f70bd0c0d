import t from 'tap';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { run, tryRun, undoOnExit } from '../faults/cleanup.js';
import { postgresUnavailable, startPostgres, type PostgresServer } from './postgres.js';
import { scaled, until } from './wait.js';

const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as Error);

/** A client over TCP with a password, as the product connects; ended by the caller. */
async function connect(url: string, timeoutMs = 5_000): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function selectOne(url: string, timeoutMs?: number): Promise<number> {
  const client = await connect(url, timeoutMs);
  try {
    return (await client.query('SELECT 1 AS one')).rows[0].one as number;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const processState = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
};

const unavailable = postgresUnavailable();
if (unavailable) {
  t.test('the throwaway PostgreSQL of the tests', (t) => t.plan(0, unavailable));
} else {
  let server: PostgresServer | undefined;
  t.before(async () => {
    server = await startPostgres();
  });
  t.teardown(() => server?.stop());

  t.test('a restart keeps the data and the port; while stopped, connections are refused', async (t) => {
    await server!.query('CREATE TABLE kept (value text)');
    await server!.query("INSERT INTO kept VALUES ('before')");
    const { port } = server!;
    const firstPid = server!.pid();
    await server!.restart();
    t.equal(server!.port, port);
    t.not(server!.pid(), firstPid, 'a new postmaster');
    t.same((await server!.query('SELECT value FROM kept')).rows, [{ value: 'before' }]);
    t.equal(await selectOne(server!.url()), 1, 'TCP with the password on the same port');

    await server!.stopKeepingData();
    t.notOk(server!.running());
    t.match(await failure(selectOne(server!.url())), { code: 'ECONNREFUSED' });
    await server!.start();
    t.same((await server!.query('SELECT value FROM kept')).rows, [{ value: 'before' }]);
  });

  t.test('a frozen server accepts no statement on an open connection nor a new one, and answers again once thawed', async (t) => {
    const open = await connect(server!.url(), scaled(300));
    await server!.freeze();
    t.teardown(() => server!.thaw());
    // SIGSTOP takes effect when the process is next scheduled: on a busy machine it may still be running a moment.
    t.equal(await until('the postmaster to stop', () => (processState(server!.pid()!) === 'T' ? 'T' : undefined)), 'T', 'the postmaster is stopped');
    t.match(await failure(open.query('SELECT 1')), { message: /timeout/i }, 'a statement hangs');
    t.match(await failure(selectOne(server!.url(), scaled(300))), { message: /timeout/i }, 'a new connection hangs');
    await open.end().catch(() => undefined);
    await server!.thaw();
    t.equal(await selectOne(server!.url()), 1);
  });

  const netnsSkip = process.getuid?.() !== 0 ? 'needs root: it creates a network namespace' : !tryRun('ip', ['-V']) ? 'needs the ip command (iproute2)' : undefined;
  t.test('a server in its own network namespace listens on the address given, reached from outside with the password', { skip: netnsSkip }, async (t) => {
    const netns = `fppg${process.pid}`;
    const [outside, inside] = ['10.203.0.1', '10.203.0.2'];
    const cleanUp = undoOnExit(() => {
      tryRun('ip', ['netns', 'del', netns]);
      tryRun('ip', ['link', 'del', `vpg${process.pid}`]);
    });
    run('ip', ['netns', 'add', netns]);
    run('ip', ['link', 'add', `vpg${process.pid}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    run('ip', ['addr', 'add', `${outside}/30`, 'dev', `vpg${process.pid}`]);
    run('ip', ['link', 'set', `vpg${process.pid}`, 'up']);
    run('ip', ['-n', netns, 'addr', 'add', `${inside}/30`, 'dev', 'eth0']);
    run('ip', ['-n', netns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    const isolated = await startPostgres({ netns, listenAddress: inside });
    t.teardown(async () => {
      await isolated.stop();
      cleanUp();
    });
    t.equal(isolated.host, inside);
    t.equal(run('ip', ['netns', 'identify', String(isolated.pid())]).trim(), netns);
    t.equal(await selectOne(isolated.url()), 1);
    await isolated.restart();
    t.equal(await selectOne(isolated.url()), 1, 'restarted in the same namespace');
  });
}
