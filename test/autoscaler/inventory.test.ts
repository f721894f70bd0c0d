import t from 'tap';
import { clusterNode } from '../../src/autoscaler/inventory.js';

t.test('a server record as the decision sees it: starting and pending count as pending, unknown statuses as stopped', async (t) => {
  const node = (status: unknown) => clusterNode({ _id: 's', master: { status, startedAt: '2026-01-01T00:00:00.000Z' } }).status;
  t.equal(node('starting'), 'pending');
  t.equal(node('pending'), 'pending');
  t.equal(node('running'), 'running');
  t.equal(node('terminating'), 'terminating');
  t.equal(node('failed'), 'failed');
  t.equal(node('stopped'), 'stopped');
  t.equal(node('made-up'), 'stopped');
  t.equal(node(undefined), 'stopped');
});

t.test('a running record whose workers have not served yet is pending; one without the field has served since it started', async (t) => {
  const started = '2026-01-01T00:00:00.000Z';
  t.same(clusterNode({ _id: 'a', master: { status: 'running', startedAt: started, servingSince: null } }), { id: 'a', status: 'pending', createdAt: Date.parse(started) });
  t.same(clusterNode({ _id: 'b', master: { status: 'running', startedAt: started } }), { id: 'b', status: 'running', createdAt: Date.parse(started), servingSince: Date.parse(started) });
  t.same(clusterNode({ _id: 'c', master: { status: 'running', startedAt: started, servingSince: 5 } }), { id: 'c', status: 'running', createdAt: Date.parse(started), servingSince: 5 });
});

t.test('the creation time: the master section first, then its start, then the record itself; none readable is 0', async (t) => {
  t.equal(clusterNode({ _id: 'a', master: { createdAt: 10, startedAt: 20 }, createdAt: 30 }).createdAt, 10);
  t.equal(clusterNode({ _id: 'b', master: { createdAt: 'not a time', startedAt: 20 }, createdAt: 30 }).createdAt, 20);
  t.equal(clusterNode({ _id: 'c', createdAt: '1970-01-01T00:00:00.040Z' }).createdAt, 40);
  t.equal(clusterNode({ _id: 'd' }).createdAt, 0);
});
