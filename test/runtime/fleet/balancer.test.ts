import t from 'tap';
import { ConnectionBalancer } from '../../../src/runtime/fleet/balancer.js';
import type { WorkerRecord } from '../../../src/runtime/fleet/worker-record.js';
import { fakeConnection, fakeRecord } from '../../helpers/fake-workers.js';

const slotsPicked = (balancer: ConnectionBalancer, count: number) => Array.from({ length: count }, () => balancer.pickForConnection()?.slot);

t.test('connections go round-robin over the ready workers', async (t) => {
  const records = [fakeRecord(1), fakeRecord(2), fakeRecord(3)];
  t.same(slotsPicked(new ConnectionBalancer(records), 7), [1, 2, 3, 1, 2, 3, 1]);
});

t.test('workers that do not take traffic are skipped: starting, cordoned, draining, retiring, disconnected', async (t) => {
  const gone = fakeRecord(5);
  gone.worker.connected = false;
  const records = [
    fakeRecord(1, { status: 'starting' }),
    fakeRecord(2),
    fakeRecord(3, { status: 'cordoned' }),
    fakeRecord(4, { retiring: 'maxAge' }),
    gone,
    fakeRecord(6, { status: 'draining' }),
    fakeRecord(7),
  ];
  t.same(slotsPicked(new ConnectionBalancer(records), 4), [2, 7, 2, 7]);
});

t.test('no worker taking traffic: no pick, so the primary answers with the fallback', async (t) => {
  t.equal(new ConnectionBalancer([]).pickForConnection(), undefined);
  t.equal(new ConnectionBalancer([fakeRecord(1, { status: 'cordoned' }), fakeRecord(2, { status: 'starting' })]).pickForConnection(), undefined);
});

t.test('the rotation follows the live list as workers come and go', async (t) => {
  const records: WorkerRecord[] = [fakeRecord(1), fakeRecord(2)];
  const balancer = new ConnectionBalancer(records);
  t.equal(balancer.pickForConnection()?.slot, 1);
  records.push(fakeRecord(3));
  t.same(slotsPicked(balancer, 3), [2, 3, 1]);
  records.splice(1, 1);
  t.same(slotsPicked(balancer, 3), [3, 1, 3]);
});

t.test("the primary's copy of a handed-off connection is closed once the worker confirms it took it, not when written", async (t) => {
  const record = fakeRecord(1);
  const balancer = new ConnectionBalancer([record]);
  const connection = fakeConnection();
  let rerouted = 0;
  balancer.handOff(record, connection, true, () => rerouted++);
  const [sent] = record.worker.connections;
  t.match(sent!.message, { fp: 'conn', secure: true, id: Number });
  sent!.written(null);
  t.equal(connection.closed, false, 'written is not taken: the worker may die with the message unread');
  t.equal(record.handOffs.size, 1);
  balancer.taken(record, (sent!.message as { id: number }).id);
  t.equal(connection.closed, true);
  t.equal(record.handOffs.size, 0);
  balancer.rerouteUntaken(record);
  t.equal(rerouted, 0, 'a taken connection is never re-routed');
});

t.test('a hand-off whose send fails is served elsewhere, and the connection stays open', async (t) => {
  const record = fakeRecord(1);
  const balancer = new ConnectionBalancer([record]);
  const connection = fakeConnection();
  let rerouted = 0;
  balancer.handOff(record, connection, false, () => rerouted++);
  record.worker.connections[0]!.written(new Error('channel closed'));
  t.equal(rerouted, 1);
  t.equal(connection.closed, false);
  balancer.rerouteUntaken(record);
  t.equal(rerouted, 1, 'once');
});

t.test('hand-offs written but never confirmed are re-routed once when their worker goes', async (t) => {
  const record = fakeRecord(1);
  const balancer = new ConnectionBalancer([record]);
  const rerouted: string[] = [];
  const first = fakeConnection();
  const second = fakeConnection();
  balancer.handOff(record, first, false, () => rerouted.push('first'));
  balancer.handOff(record, second, false, () => rerouted.push('second'));
  record.worker.connections[0]!.written(null);
  balancer.rerouteUntaken(record);
  t.same(rerouted, ['first', 'second'], 'the written one too: its message may sit unread in a dead socket');
  t.equal(record.handOffs.size, 0);
  record.worker.connections[1]!.written(new Error('late callback of a dead channel'));
  balancer.taken(record, (record.worker.connections[0]!.message as { id: number }).id);
  t.same(rerouted, ['first', 'second'], 'a late callback or confirmation does not serve the connection a second time');
  t.equal(first.closed, false, "the primary's copy of a re-routed connection stays open for its new worker");
  balancer.rerouteUntaken(record);
  t.same(rerouted, ['first', 'second'], 'nothing left to re-route');
});

t.test('hand-off ids are unique across workers', async (t) => {
  const records = [fakeRecord(1), fakeRecord(2)];
  const balancer = new ConnectionBalancer(records);
  for (const record of [...records, ...records]) balancer.handOff(record, fakeConnection(), false, () => {});
  const ids = records.flatMap((record) => record.worker.connections.map((sent) => (sent.message as { id: number }).id));
  t.equal(new Set(ids).size, 4);
});
