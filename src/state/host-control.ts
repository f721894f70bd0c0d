import { execFile } from 'node:child_process';
import { IpcError } from '../ipc/envelope.js';

export interface HostControlConfig {
  hostControl: boolean;
  rebootCommand: string[];
  shutdownCommand: string[];
}

/**
 * SPEC 3.5: rebooting or powering off a host is refused unless the operator enabled it in the config and
 * the envelope names this very server in `confirm`, so a broadcast or a typo cannot take a fleet down.
 */
export function assertHostControlAllowed(config: HostControlConfig, serverId: string, confirm: unknown): void {
  if (!config.hostControl) throw new IpcError('forbidden', 'host control is disabled on this server (lifecycle.hostControl)');
  if (confirm !== serverId) throw new IpcError('bad_request', `confirm must be this server's id ("${serverId}")`, 'confirm');
}

/** Runs the configured command (argv, no shell); resolves with its exit code. */
export function runHostCommand(argv: string[], timeoutMs = 30_000): Promise<{ code: number; stderr: string }> {
  const [file, ...args] = argv;
  return new Promise((resolve) => {
    execFile(file!, args, { timeout: timeoutMs, windowsHide: true }, (error, _stdout, stderr) => {
      const code = error ? (typeof (error as NodeJS.ErrnoException & { code?: unknown }).code === 'number' ? Number((error as { code: number }).code) : 1) : 0;
      resolve({ code, stderr: String(stderr).slice(0, 2_000) });
    });
  });
}
