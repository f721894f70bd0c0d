import t from 'tap';
import { ServerMembership, type MembershipSource } from '../../src/inventory/membership.js';
import type { MasterSection } from '../../src/inventory/records.js';

function setup(options: { failSaves?: boolean } = {}) {
  const saved: MasterSection[] = [];
  const errors: string[] = [];
  let describe: (() => MasterSection) | undefined;
  const host = { status: 'starting', workerCount: 2, publicUrl: () => 'https://a.example', meshUrl: () => 'wss://a.example:9443' } satisfies MembershipSource;
  const store = {
    describeInventory: (section: () => MasterSection) => void (describe = section),
    save: async () => {
      if (options.failSaves) throw new Error('disk full');
      saved.push(describe!());
    },
  };
  const membership = new ServerMembership(host, store, { info: () => {}, error: (_fields, message) => void errors.push(message) });
  return { membership, host, saved, errors, describe: () => describe!() };
}

t.test("this server's record: running once joined, marked serving once, stopped from the start of a shutdown", async (t) => {
  const { membership, host, saved } = setup();
  membership.serving();
  t.same(saved, [], 'serving before the record was written saves nothing yet');
  host.status = 'ready';
  await membership.join();
  t.match(saved.at(-1), { status: 'running', pid: process.pid, publicUrl: 'https://a.example', meshUrl: 'wss://a.example:9443', workers: 2, servingSince: String });
  const since = saved.at(-1)!.servingSince;
  membership.serving();
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(saved.length, 1, 'serving again changes nothing');
  await membership.leave();
  t.match(saved.at(-1), { status: 'stopped', servingSince: since });
});

t.test('a server that joins, then serves, saves the moment it serves; one leaving is never marked serving', async (t) => {
  const first = setup();
  await first.membership.join();
  t.equal(first.saved.at(-1)!.servingSince, null);
  first.membership.serving();
  await new Promise((resolve) => setImmediate(resolve));
  t.match(first.saved.at(-1), { status: 'running', servingSince: String });

  const second = setup();
  await second.membership.join();
  await second.membership.leave();
  second.membership.serving();
  t.equal(second.describe().servingSince, null);
  second.host.status = 'stopping';
  t.equal(second.describe().status, 'stopped');
});

t.test('a save that fails is logged and never stops the server', async (t) => {
  const { membership, errors } = setup({ failSaves: true });
  await t.resolves(membership.join());
  await t.resolves(membership.leave());
  t.same(errors, ['inventory record not written: peers will not discover this server', 'inventory record not marked stopped']);
});
