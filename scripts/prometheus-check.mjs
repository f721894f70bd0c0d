#!/usr/bin/env node
// Proves a real Prometheus scrapes /metrics: starts a Fleetplane server (2 workers, a platform admin key in a
// temporary data directory), runs `prometheus` against it with that key as a Bearer credential, scraping every
// second for PROMETHEUS_CHECK_SECONDS (default 30), then asks Prometheus's HTTP API whether the scrapes
// succeeded and runs `promtool check metrics` on a scraped body. Exits non-zero on any failure; exits 0 with
// a note when prometheus or promtool is not installed. Run after `npm run build`.
// The same file is the server (PROMETHEUS_CHECK_ROLE=server): its workers are forked from it.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { announcement, dist, freePort, killGroup, platformKey, until } from './lib/processes.mjs';

if (process.env.PROMETHEUS_CHECK_ROLE === 'server') {
  const { Fleetplane } = await import(dist('index.js'));
  const server = await Fleetplane.init(JSON.parse(process.env.PROMETHEUS_CHECK_CONFIG));
  if (server.isPrimary) process.stdout.write(`${JSON.stringify({ port: server.ports.http })}\n`);
} else {
  process.exitCode = await main();
}

async function main() {
  const missing = ['prometheus', 'promtool'].filter((tool) => spawnSync(tool, ['--version'], { stdio: 'ignore' }).error);
  if (missing.length > 0) {
    console.log(`prometheus-check: skipped, ${missing.join(' and ')} not installed (Debian package "prometheus")`);
    return 0;
  }
  if (!existsSync(dist('index.js'))) {
    console.error('prometheus-check: dist/ is missing; run `npm run build` first');
    return 1;
  }
  const seconds = Number(process.env.PROMETHEUS_CHECK_SECONDS ?? 30);
  const work = mkdtempSync(path.join(os.tmpdir(), 'fleetplane-prometheus-'));
  const children = [];
  const stop = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) killGroup(child.pid);
  };
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      stop();
      rmSync(work, { recursive: true, force: true });
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
  try {
    const key = await platformKey(path.join(work, 'data'));
    const server = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
      detached: true,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        PROMETHEUS_CHECK_ROLE: 'server',
        PROMETHEUS_CHECK_CONFIG: JSON.stringify({ dataDir: path.join(work, 'data'), workers: 2, http: { port: 0, host: '127.0.0.1' }, log: { level: 'warn' } }),
      },
    });
    children.push(server);
    const { port } = await announcement(server, 20_000);
    const target = `http://127.0.0.1:${port}`;
    await until(async () => (await fetch(`${target}/readyz`)).status === 200, 20_000, 'the server is not ready');
    // Some traffic, so the HTTP series have observations.
    await fetch(`${target}/healthz`);
    await fetch(`${target}/workflows/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await fetch(`${target}/no-such-route`);

    const promPort = await freePort();
    const config = path.join(work, 'prometheus.yml');
    writeFileSync(
      config,
      [
        'global:',
        '  scrape_interval: 1s',
        '  scrape_timeout: 1s',
        'scrape_configs:',
        '  - job_name: fleetplane',
        '    metrics_path: /metrics',
        '    authorization:',
        `      credentials: ${JSON.stringify(key)}`,
        '    static_configs:',
        `      - targets: ["127.0.0.1:${port}"]`,
        '',
      ].join('\n'),
    );
    const prometheus = spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${path.join(work, 'tsdb')}`, `--web.listen-address=127.0.0.1:${promPort}`], {
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(prometheus);
    const promLog = [];
    prometheus.stderr.on('data', (chunk) => promLog.push(chunk));
    const api = `http://127.0.0.1:${promPort}`;
    await until(async () => (await fetch(`${api}/-/ready`)).status === 200, 30_000, 'prometheus did not become ready');
    console.log(`prometheus-check: Prometheus on 127.0.0.1:${promPort} scrapes ${target}/metrics every 1 s for ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));

    const failures = [];
    const query = async (expression) => {
      const reply = await (await fetch(`${api}/api/v1/query?query=${encodeURIComponent(expression)}`)).json();
      if (reply.status !== 'success') throw new Error(`query ${expression}: ${JSON.stringify(reply)}`);
      return reply.data.result.map((sample) => ({ labels: sample.metric, value: Number(sample.value[1]) }));
    };
    const up = await query('up{job="fleetplane"}');
    console.log(`  up{job="fleetplane"} = ${up.map((sample) => sample.value).join(', ') || 'none'}`);
    if (up.length !== 1 || up[0].value !== 1) {
      const targets = await (await fetch(`${api}/api/v1/targets`)).json();
      failures.push(`up is not 1; last scrape error: ${targets.data?.activeTargets?.[0]?.lastError || 'none'}`);
    }
    const scrapes = await query(`count_over_time(up{job="fleetplane"}[${seconds + 30}s])`);
    const failed = await query(`count_over_time((up{job="fleetplane"} == 0)[${seconds + 30}s:])`);
    const scrapeCount = scrapes[0]?.value ?? 0;
    console.log(`  scrapes: ${scrapeCount}, failed: ${failed[0]?.value ?? 0}`);
    if (scrapeCount < seconds / 2) failures.push(`only ${scrapeCount} scrapes in ${seconds} s`);
    if ((failed[0]?.value ?? 0) > 0) failures.push(`${failed[0].value} scrapes failed`);
    for (const expression of ['sum(fleetplane_http_requests_total)', 'fleetplane_process_resident_memory_bytes{worker="0"}', 'count(fleetplane_process_cpu_seconds_total)']) {
      const result = await query(expression);
      console.log(`  ${expression} = ${result.map((sample) => sample.value).join(', ') || 'none'}`);
      if (result.length === 0 || !(result[0].value > 0)) failures.push(`${expression}: no sample`);
    }
    const processes = (await query('count(fleetplane_process_cpu_seconds_total)'))[0]?.value;
    if (processes !== 3) failures.push(`process metrics of ${processes} processes, expected 3 (primary and 2 workers)`);

    const anonymous = (await fetch(`${target}/metrics`)).status;
    console.log(`  GET /metrics without the key: ${anonymous}`);
    if (anonymous < 400) failures.push(`/metrics answered ${anonymous} without a key: the Bearer credential proves nothing`);
    const body = await (await fetch(`${target}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text();
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8', timeout: 30_000 });
    const lintOutput = `${lint.stdout}${lint.stderr}`.trim();
    console.log(`  promtool check metrics: exit ${lint.status}${lintOutput ? `\n${lintOutput}` : ', no finding'}`);
    if (lint.status !== 0 || lintOutput) failures.push('promtool check metrics reported problems');

    if (failures.length > 0) {
      console.error(`prometheus-check: FAILED\n${failures.map((failure) => `  - ${failure}`).join('\n')}`);
      if (promLog.length > 0) console.error(Buffer.concat(promLog).toString('utf8').split('\n').slice(-10).join('\n'));
      return 1;
    }
    console.log('prometheus-check: ok');
    return 0;
  } catch (error) {
    console.error(`prometheus-check: FAILED: ${error.message}`);
    return 1;
  } finally {
    stop();
    rmSync(work, { recursive: true, force: true });
  }
}






