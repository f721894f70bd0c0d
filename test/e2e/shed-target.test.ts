import t from 'tap';
import { ServerProcess, fleetplane, request } from '../helpers/server-process.js';
import { dataDirWithTenants } from '../helpers/tenants.js';

// Real processes on a shared machine: generous budgets, no fixed sleeps.
t.setTimeout(300_000);

const REFUSAL = { code: 'invalid_target', message: 'shed applies to the whole server: use master: true or server: <id>, not worker' };

/** Whether each of the two workers serves the organization: fresh connections go round-robin, so four reach both. */
async function servedBy(port: number, host: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let index = 0; index < 4; index++) statuses.push((await request(port, '/whoami', { host })).status);
  return statuses;
}

t.test('shed aimed at one worker is refused with 400 invalid_target over /control and the control socket, and no worker sheds', async (t) => {
  const { dataDir, tenants } = await dataDirWithTenants([
    { name: 'acme', hosts: ['localhost', '127.0.0.1'] },
    { name: 'globex', hosts: ['globex.test'] },
  ]);
  const [acme, globex] = [tenants[0]!, tenants[1]!];
  const server = await ServerProcess.start({ workers: 2, dataDir, fallback: { redirect: 'http://lb.example.test' } });
  t.teardown(() => server.stop());
  await server.readyWorkers(2);
  const shed = (body: Record<string, unknown>) => request(server.port, '/control', { host: 'localhost', key: acme.adminKey, body });

  for (const envelope of [
    { method: 'shed', worker: 2, organizations: [globex.organization_id] },
    { method: 'shed', server: server.events[0]!.id, worker: [1, 2], data: [globex.organization_id] },
    { method: 'shed', master: true, worker: 1, organizations: [globex.organization_id] },
  ]) {
    const refused = await shed(envelope);
    t.equal(refused.status, 400, `POST /control ${JSON.stringify(envelope)}: 400`);
    t.same(refused.json(), { error: REFUSAL }, 'the refusal says shedding is per server');
  }
  t.same(await servedBy(server.port, 'globex.test'), [200, 200, 200, 200], 'globex is still served by every worker');

  const socket = await fleetplane(['ctl', 'shed', '--worker', '2', '--value', JSON.stringify([globex.organization_id]), '--data-dir', dataDir]);
  t.equal(socket.status, 2, `ctl through the control socket exits 2: ${socket.stdout}${socket.stderr}`);
  t.match(socket.stderr, `${REFUSAL.code}: ${REFUSAL.message}`, 'the reason');
  t.equal(socket.stderr.trim().split('\n').length, 1, 'on one line');
  t.equal(socket.stdout, '', 'and no reply printed');
  t.same(await servedBy(server.port, 'globex.test'), [200, 200, 200, 200], 'globex is still served by every worker');

  // The server-wide forms are what shedding is.
  const accepted = await shed({ method: 'shed', master: true, organizations: [globex.organization_id] });
  t.equal(accepted.status, 200, accepted.body);
  t.same(await servedBy(server.port, 'globex.test'), [307, 307, 307, 307], 'shed with master: true: every worker sheds globex');
  const ended = await fleetplane(['ctl', 'shed', '--master', '--value', 'false', '--data-dir', dataDir]);
  t.equal(ended.status, 0, ended.stderr);
  t.same(await servedBy(server.port, 'globex.test'), [200, 200, 200, 200], 'ended through the control socket');
});
