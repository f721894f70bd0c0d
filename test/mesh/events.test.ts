import t from 'tap';
import { inProcessMesh, point, until } from './in-process.js';

t.test('a mesh event listener that throws is logged and the listeners after it still run', async (t) => {
  const dialer = await inProcessMesh('m-events-b');
  const acceptor = await inProcessMesh('m-events-a');
  t.teardown(() => {
    dialer.mesh.close(1000);
    acceptor.mesh.close(1000);
  });
  const heard: string[] = [];
  dialer.mesh.on('link:open', () => {
    throw new Error('listener bug');
  });
  dialer.mesh.on('link:open', ({ peer, direction }) => heard.push(`${peer} ${direction}`));
  point(dialer, acceptor);
  dialer.mesh.join();
  await until(() => heard.length === 1, 'the second listener');
  t.same(heard, ['m-events-a out'], 'the listener after the throwing one ran with the payload');
  const failures = dialer.logs.filter((entry) => entry.msg === 'mesh event listener failed');
  t.equal(failures.length, 1);
  t.match(failures[0], { event: 'link:open', err: { message: 'listener bug' } });
  t.ok((await dialer.mesh.peers()).some((peer) => peer.server === 'm-events-a'), 'the link is up regardless');
});
