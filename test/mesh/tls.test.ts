import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { dialHeaders } from '../../src/mesh/handshake.js';
import { tempDir } from '../helpers/server-process.js';
import { inProcessMesh, point, until } from './in-process.js';

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'ignore' });
}

/** A CA, certificates for 127.0.0.1 signed by it, and one certificate from an unrelated CA. */
function certificates(): { dir: string; files: (name: string) => { key: string; cert: string } } {
  const dir = tempDir('fleetplane-mesh-tls-');
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  for (const ca of ['ca', 'rogue-ca']) openssl(['req', '-x509', ...key, '-keyout', `${ca}.key`, '-out', `${ca}.pem`, '-days', '2', '-subj', `/CN=${ca}`], dir);
  for (const [name, ca] of [['m-a', 'ca'], ['m-b', 'ca'], ['intruder', 'rogue-ca']]) {
    openssl(['req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', 'san.ext'], dir);
  }
  return { dir, files: (name) => ({ key: path.join(dir, `${name}.key`), cert: path.join(dir, `${name}.pem`) }) };
}

const { dir, files } = certificates();
const tls = (name: string) => ({ ...files(name), ca: path.join(dir, 'ca.pem') });

t.test('mutual TLS without a secret: peers with certificates of the cluster CA link; others are refused and logged', async (t) => {
  const a = await inProcessMesh('m-a', { secret: undefined, tls: tls('m-a') });
  const b = await inProcessMesh('m-b', { secret: undefined, tls: tls('m-b') });
  t.teardown(() => [a, b].forEach((mesh) => mesh.mesh.close(1000)));
  t.match(a.url, /^wss:/);
  point(b, a);
  b.mesh.join();
  await until(() => [a, b].every((mesh) => mesh.events.some((event) => event.event === 'link:open')), 'the link on both sides');
  t.match(await b.mesh.peers(), [{ server: 'm-a', direction: 'out' }], 'linked over mutual TLS');

  const attempt = (options: WebSocket.ClientOptions) =>
    new Promise<string>((resolve) => {
      const { headers } = dialHeaders({ server: 'z-intruder', cluster: 'unit', to: 'm-a' }, undefined);
      const ws = new WebSocket(a.url, { headers, perMessageDeflate: false, ca: readFileSync(path.join(dir, 'ca.pem')), ...options });
      ws.on('open', () => resolve('opened'));
      ws.on('error', (error) => resolve(error.message));
    });
  const rogue = files('intruder');
  t.not(await attempt({ key: readFileSync(rogue.key), cert: readFileSync(rogue.cert) }), 'opened', 'a certificate from another CA is refused');
  t.not(await attempt({}), 'opened', 'no client certificate is refused');
  await until(() => a.logs.filter((line) => line.msg === 'mesh TLS handshake refused').length >= 2, 'the refusals in the log');
  t.same((await a.mesh.peers()).map((peer) => peer.server), ['m-b'], 'nothing else linked');

  const own = files('m-b');
  const claimed = await attempt({ key: readFileSync(own.key), cert: readFileSync(own.cert), headers: dialHeaders({ server: 'm-b', cluster: 'unit', to: 'm-a' }, undefined).headers });
  t.match(claimed, /409/, 'a good certificate claiming an id already linked is still refused');
});
