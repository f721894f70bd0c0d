import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Certificates made at test time with openssl: self-signed pairs for HTTPS, and a CA with leaves for the mesh.
 * Each carries the serial it was given, so a client can tell which one a server presents.
 */
export class Certificates {
  constructor(readonly dir: string) {}

  /** A self-signed pair for `localhost` with `serial` (hex), written to `<name>.key` / `<name>.crt`. */
  selfSigned(name: string, serial: string): { key: string; cert: string } {
    const key = path.join(this.dir, `${name}.key`);
    const cert = path.join(this.dir, `${name}.crt`);
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost', '-set_serial', `0x${serial}`, '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1']);
    return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
  }

  /** A CA (`<name>.key` / `<name>.crt`). */
  authority(name: string): { key: string; cert: string } {
    return this.selfSigned(name, '01');
  }

  /** A leaf for `cn` signed by the CA `ca`, with `serial`. */
  leaf(name: string, ca: string, cn: string, serial: string): { key: string; cert: string } {
    const key = path.join(this.dir, `${name}.key`);
    const csr = path.join(this.dir, `${name}.csr`);
    const cert = path.join(this.dir, `${name}.crt`);
    const ext = path.join(this.dir, `${name}.ext`);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${cn}`]);
    execFileSync('sh', ['-c', `printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > '${ext}'`]);
    openssl(['x509', '-req', '-in', csr, '-CA', path.join(this.dir, `${ca}.crt`), '-CAkey', path.join(this.dir, `${ca}.key`), '-set_serial', `0x${serial}`, '-days', '2', '-out', cert, '-extfile', ext]);
    return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
  }
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
