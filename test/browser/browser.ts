import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';

export const CHROMIUM = process.env.FLEETPLANE_CHROMIUM ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or undefined when they can. */
export function chromiumMissing(): string | undefined {
  return existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (Debian: apt-get install chromium)`;
}

/**
 * Flags that keep Chromium on the machine: no background requests, updates, sync or QUIC, so every request it
 * makes is one a page made. `hostRules` maps test host names to the loopback address.
 */
export function chromiumFlags(hostRules: string[] = []): string[] {
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-default-apps',
    '--disable-extensions',
    ...(hostRules.length ? [`--host-resolver-rules=${hostRules.join(', ')}`] : []),
  ];
}

/** One headless Chromium with a fresh profile, removed when it closes. */
export async function launchChromium(options: { hostRules?: string[]; viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' } = {}): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core');
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'fleetplane-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: chromiumFlags(options.hostRules),
    viewport: options.viewport ?? { width: 1280, height: 800 },
    colorScheme: options.colorScheme ?? 'light',
  });
  // Chromium's helpers may still be writing its cache as the context reports closed: retried, and never thrown
  // from the browser's event (a profile left in the temp directory is no failure of the test).
  context.once('close', () => {
    try {
      rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    } catch (error) {
      process.stderr.write(`the browser profile ${userDataDir} was not removed: ${(error as Error).message}\n`);
    }
  });
  return context;
}
