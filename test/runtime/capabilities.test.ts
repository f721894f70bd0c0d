import os from 'node:os';
import t from 'tap';
import { cgroupCpuLimit, resolveWorkerCount } from '../../src/config/sizing.js';
import { getCapabilities, probeReusePort, supportsReusePort } from '../../src/runtime/capabilities.js';

const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
// Node added the `reusePort` listen option in 23.1 and 22.12; older versions ignore it.
const nodeHasReusePort = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);

t.test('the capability summary describes this machine and this Node', async (t) => {
  const capabilities = await getCapabilities({});
  t.equal(capabilities.platform, process.platform);
  t.equal(capabilities.arch, process.arch);
  t.equal(capabilities.nodeVersion, process.versions.node);
  t.equal(capabilities.cpus, os.availableParallelism(), 'CPUs available to this process');
  t.ok(capabilities.cpus >= 1);
  t.equal(capabilities.cgroupCpuLimit, cgroupCpuLimit() ?? null, 'the cgroup quota, null when there is none');
  if (capabilities.cgroupCpuLimit !== null) t.ok(capabilities.cgroupCpuLimit > 0);
  t.equal(capabilities.autoWorkerCount, resolveWorkerCount('auto', {}).count, "what workers: 'auto' becomes");
  t.ok(capabilities.autoWorkerCount >= 1 && capabilities.autoWorkerCount <= capabilities.cpus);
  t.equal(capabilities.connectionDistribution, 'primary hand-off');
  t.equal(capabilities.reusePort, await supportsReusePort(), 'the same answer as supportsReusePort()');
  t.same(Object.keys(capabilities).sort(), ['arch', 'autoWorkerCount', 'cgroupCpuLimit', 'connectionDistribution', 'cpus', 'nodeVersion', 'platform', 'reusePort'], 'no undocumented field');
});

t.test('WEB_CONCURRENCY is what auto resolves to when set', async (t) => {
  t.equal((await getCapabilities({ WEB_CONCURRENCY: '3' })).autoWorkerCount, 3);
});

t.test('SO_REUSEPORT is measured: false on a Node without the reusePort option (Node 20), true where Linux and Node have it', async (t) => {
  const measured = await probeReusePort();
  if (!nodeHasReusePort) t.equal(measured, false, `Node ${process.versions.node} ignores reusePort: the second bind fails`);
  else if (process.platform === 'linux') t.equal(measured, true, `Node ${process.versions.node} on Linux binds twice`);
  else t.type(measured, 'boolean');
});

t.test('a probe whose first bind fails answers false', async (t) => {
  t.equal(await probeReusePort('203.0.113.1'), false, 'an address this host does not have');
});

t.test('Fleetplane exposes both helpers as statics', async (t) => {
  const { Fleetplane } = await import('../../index.js');
  t.equal(await Fleetplane.supportsReusePort(), await supportsReusePort());
  t.match(await Fleetplane.getCapabilities(), { connectionDistribution: 'primary hand-off', nodeVersion: process.versions.node });
});
