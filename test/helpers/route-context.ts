import type { RouteContext } from '../../plugins/services.js';
import type { ResolvedConfig } from '../../src/config/schema.js';

const noIpc = () => Promise.reject(new Error('this stand-in server routes no envelopes'));

/**
 * A stand-in server for the real app: ready, nothing shed, no IPC (`send` and `request` refuse). `capabilities`
 * adds what a test uses (a store, an authorizer, the automation services...) or replaces a default.
 */
export function standInServer<Capabilities extends Partial<RouteContext>>(config: ResolvedConfig, capabilities: Capabilities): RouteContext & Capabilities {
  return {
    id: 'test-server',
    workerId: 1,
    config,
    status: 'ready',
    state: { shedding: new Set<string>(), isShed: () => false },
    getHealth: () => ({ ready: true, live: true, status: 'ready' }),
    metricsText: async () => '',
    send: noIpc,
    request: noIpc,
    ...capabilities,
  };
}
