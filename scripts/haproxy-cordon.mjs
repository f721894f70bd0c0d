#!/usr/bin/env node
// Proves the readiness grace behind a real HAProxy: two Fleetplane servers (A with 2 workers, B with 1) behind
// HAProxy with `option httpchk GET /readyz`; steady keep-alive load goes through HAProxy while every worker of
// A is cordoned (POST /control with A's platform admin key) with the default `lifecycle.readinessGraceMs`.
// HAProxy must take A out during the grace, so no client ever sees A's fallback redirect: prints a JSON summary
// and exits non-zero on any 307, non-2xx or failed request. Exits 0 with a note when haproxy is not installed.
// HAPROXY_CORDON_SECONDS sets the load's length (default 15); HAPROXY_CORDON_GRACE_MS overrides A's grace
// (e.g. 0 to see the redirects the grace prevents). Run after `npm run build`.
// The same file is the server (HAPROXY_CORDON_ROLE=server): its workers are forked from it.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { announcement, dist, freePort, killGroup, platformKey, until } from './lib/processes.mjs';
/** HAProxy's health check: every CHECK_INTER_MS, down after FALL failures. */
const CHECK_INTER_MS = 500;
const FALL = 2;

if (process.env.HAPROXY_CORDON_ROLE === 'server') {
  const { Fleetplane } = await import(dist('index.js'));
  const routes = async (app) => app.get('/hello', async () => ({ server: app.fleetplane.id, worker: app.fleetplane.workerId }));
  const server = await Fleetplane.init(JSON.parse(process.env.HAPROXY_CORDON_CONFIG), { routes });
  if (server.isPrimary) process.stdout.write(`${JSON.stringify({ port: server.ports.http, id: server.id })}\n`);
} else {
  process.exitCode = await main();
}

async function main() {
  if (spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).error) {
    console.log('haproxy-cordon: skipped, haproxy is not installed (Debian package "haproxy")');
    return 0;
  }
  if (!existsSync(dist('index.js'))) {
    console.error('haproxy-cordon: dist/ is missing; run `npm run build` first');
    return 1;
  }
  const seconds = Number(process.env.HAPROXY_CORDON_SECONDS ?? 15);
  const { loadConfig } = await import(dist('src/config/load.js'));
  const override = process.env.HAPROXY_CORDON_GRACE_MS;
  const graceMs = override === undefined ? loadConfig({ object: {}, env: {}, cwd: os.tmpdir() }).config.lifecycle.readinessGraceMs : Number(override);
  // HAProxy must see FALL failed checks within the grace, with a check interval to spare.
  if (override === undefined && CHECK_INTER_MS * (FALL + 1) >= graceMs) {
    console.error(`haproxy-cordon: the default grace (${graceMs} ms) is shorter than HAProxy's detection (${CHECK_INTER_MS} ms × ${FALL + 1})`);
    return 1;
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-haproxy-'));
  const children = [];
  const stop = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) killGroup(child.pid);
  };
  process.once('SIGINT', () => {
    stop();
    process.exit(130);
  });
  try {
    const lbPort = await freePort();
    const key = await platformKey(path.join(work, 'a'));
    const startServer = async (name, workers) => {
      const config = {
        dataDir: path.join(work, name),
        workers,
        http: { port: 0, host: '127.0.0.1' },
        log: { level: 'warn' },
        fallback: { redirect: `http://127.0.0.1:${lbPort}` },
        ...(override === undefined ? {} : { lifecycle: { readinessGraceMs: graceMs } }),
      };
      const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
        detached: true,
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, HAPROXY_CORDON_ROLE: 'server', HAPROXY_CORDON_CONFIG: JSON.stringify(config) },
      });
      children.push(child);
      const announced = await announcement(child, 20_000);
      await until(async () => (await fetch(`http://127.0.0.1:${announced.port}/readyz`)).status === 200, 20_000, `server ${name} is not ready`);
      return announced;
    };
    const a = await startServer('a', 2);
    const b = await startServer('b', 1);

    const config = path.join(work, 'haproxy.cfg');
    writeFileSync(
      config,
      [
        'global',
        '  maxconn 512',
        'defaults',
        '  mode http',
        '  timeout connect 2s',
        '  timeout client 30s',
        '  timeout server 30s',
        'frontend fleetplane',
        `  bind 127.0.0.1:${lbPort}`,
        '  default_backend nodes',
        'backend nodes',
        '  balance roundrobin',
        // A new server connection per request: the strictest case, as a cordoned worker keeps serving the
        // connections it already has and only new ones meet the fallback.
        '  option http-server-close',
        '  option httpchk GET /readyz',
        '  http-check expect status 200',
        `  default-server inter ${CHECK_INTER_MS} fall ${FALL} rise 2`,
        `  server a 127.0.0.1:${a.port} check`,
        `  server b 127.0.0.1:${b.port} check`,
        '',
      ].join('\n'),
    );
    const haproxy = spawn('haproxy', ['-f', config, '-db'], { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(haproxy);
    const haproxyLog = [];
    haproxy.stderr.on('data', (chunk) => haproxyLog.push(chunk));
    const lb = `http://127.0.0.1:${lbPort}`;
    // Both nodes answer through HAProxy before the load starts.
    const seen = new Set();
    await until(async () => seen.add((await (await fetch(`${lb}/hello`)).json()).server).size === 2, 20_000, 'HAProxy did not reach both servers');

    const counts = { total: 0, byStatus: {}, redirects: 0, failed: 0, errors: [], fromA: { beforeCordon: 0, duringCordon: 0, afterCordon: 0 }, fromB: 0 };
    let phase = 'beforeCordon';
    let running = true;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const loop = async () => {
      while (running) {
        try {
          const reply = await get(lbPort, '/hello', agent);
          counts.total++;
          counts.byStatus[reply.status] = (counts.byStatus[reply.status] ?? 0) + 1;
          if (reply.status >= 300 && reply.status < 400) counts.redirects++;
          if (reply.status < 200 || reply.status >= 300) counts.failed++;
          else if (JSON.parse(reply.body).server === a.id) counts.fromA[phase]++;
          else counts.fromB++;
        } catch (error) {
          counts.total++;
          counts.failed++;
          if (counts.errors.length < 10) counts.errors.push(error.message);
        }
      }
    };
    const loops = Array.from({ length: 8 }, loop);
    const started = Date.now();
    await sleep((seconds * 1000) / 3);
    phase = 'duringCordon';
    // Answered once applied (`wait`), after the grace: a cordon is otherwise answered as soon as it is accepted.
    const cordon = await post(a.port, '/control', { method: 'cordon', master: true, data: { value: true, wait: true }, timeoutMs: graceMs + 10_000 }, key);
    phase = 'afterCordon';
    const direct = await get(a.port, '/hello');
    await sleep(Math.max(0, started + seconds * 1000 - Date.now()));
    running = false;
    await Promise.all(loops);
    agent.destroy();

    const summary = {
      seconds,
      readinessGraceMs: graceMs,
      check: { interMs: CHECK_INTER_MS, fall: FALL },
      cordon: { status: cordon.status },
      fallbackOfA: { status: direct.status, location: direct.headers.location ?? null },
      requests: counts.total,
      byStatus: counts.byStatus,
      redirects: counts.redirects,
      failed: counts.failed,
      errors: counts.errors,
      servedByA: counts.fromA,
      servedByB: counts.fromB,
    };
    console.log(JSON.stringify(summary, null, 2));
    const problems = [];
    if (cordon.status !== 200) problems.push(`the cordon answered ${cordon.status}`);
    if (direct.status !== 307) problems.push(`A's fallback answered ${direct.status}, not 307: the cordon did not take effect`);
    if (counts.fromA.beforeCordon === 0 || counts.fromB === 0) problems.push('the load did not reach both servers');
    if (counts.redirects > 0) problems.push(`${counts.redirects} redirects`);
    if (counts.failed > 0) problems.push(`${counts.failed} failed requests`);
    if (problems.length > 0) {
      console.error(`haproxy-cordon: FAILED: ${problems.join('; ')}`);
      if (haproxyLog.length > 0) console.error(Buffer.concat(haproxyLog).toString('utf8').split('\n').slice(-10).join('\n'));
      return 1;
    }
    console.log('haproxy-cordon: ok');
    return 0;
  } catch (error) {
    console.error(`haproxy-cordon: FAILED: ${error.message}`);
    return 1;
  } finally {
    stop();
    rmSync(work, { recursive: true, force: true });
  }
}


function get(port, pathname, agent = false) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: pathname, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

async function post(port, pathname, body, key) {
  const reply = await fetch(`http://127.0.0.1:${port}${pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  await reply.arrayBuffer();
  return { status: reply.status };
}





function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

