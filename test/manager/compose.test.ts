import t from 'tap';
import type { ApiReply } from '../../src/api/service.js';
import { createOrganization } from '../../src/auth/organizations.js';
import { loadConfig } from '../../src/config/load.js';
import { createManagerServices } from '../../src/manager/compose.js';
import { systemClock } from '../../src/runtime/clock.js';
import { testStore } from '../auth/fixtures/tenants.js';
import { logger } from './fixtures.js';

t.test('without a store or a platform organization the manager is only a connection', async (t) => {
  const config = loadConfig({ env: {}, object: { manager: { organizationId: 'p', host: 'parent.example', apiKey: 'k' } } }).config;
  const api = async (): Promise<ApiReply> => ({ status: 200, data: null });
  const services = await createManagerServices({ serverId: 's1', config, platformOrganization: null, api, log: logger().log, clock: systemClock });
  t.teardown(() => services.close());
  t.same(JSON.parse(JSON.stringify(services.manager)), { organization_id: 'p', host: 'parent.example' });
  t.equal(services.fleet, undefined);
  await t.rejects(services.manager.createServer({ cluster: { _id: 'c', organization_id: 'p' } }), { code: 'unavailable', statusCode: 503 });
});

t.test('a platform server gets the fleet and the activation; a tenant organization does not reach the local provider', async (t) => {
  const store = await testStore();
  t.teardown(() => store.close());
  const platform = (await createOrganization(store, { name: 'platform', hosts: ['platform.test'] }))._id;
  const api = async (): Promise<ApiReply> => ({ status: 200, data: null });
  const config = loadConfig({ env: {}, object: {} }).config;
  const services = await createManagerServices({ serverId: 's1', config, store, platformOrganization: platform, api, log: logger().log, clock: systemClock });
  t.teardown(() => services.close());
  t.ok(services.fleet);
  t.ok(services.activation);
  t.equal(services.manager.managed, false, 'a parent need not be managed itself');
});
