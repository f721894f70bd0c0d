import { Type } from '@sinclair/typebox';

const Ms = (defaultMs: number, description: string) => Type.Integer({ minimum: 0, default: defaultMs, description });

/**
 * SPEC 1.5: the graceful shutdown's budgets, with clusterkit's keys and bounds: `timeoutMs` keeps its documented
 * minimum of 1 s, and `messagePrefix` names the shutdown notice as clusterkit's does (Fleetplane's own messages
 * are marked by `fp`, which it does not rename).
 */
export const ShutdownSection = Type.Object(
  {
    timeoutMs: Type.Integer({ minimum: 1_000, default: 12_000, description: 'Graceful shutdown budget before escalation (at least 1000)' }),
    ackTimeoutMs: Ms(3_000, 'Wait for a worker to acknowledge shutdown'),
    sigtermDelayMs: Ms(2_000, 'Delay between SIGTERM and SIGINT when escalating'),
    sigintDelayMs: Ms(1_000, 'Delay between SIGINT and SIGKILL when escalating'),
    drainTimeoutMs: Ms(10_000, 'Longest a draining worker waits for its connections to finish'),
    messagePrefix: Type.String({
      minLength: 1,
      maxLength: 32,
      pattern: '^[A-Za-z0-9_.-]+$',
      default: 'fleetplane',
      description: 'The shutdown notice each worker receives over IPC carries type "<messagePrefix>:shutdown" (clusterkit\'s default: "__wm")',
    }),
  },
  { additionalProperties: false, default: {} },
);
