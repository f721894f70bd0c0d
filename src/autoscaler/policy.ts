import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

const Percent = Type.Number({ minimum: 0, maximum: 100 });

/** One resource's thresholds, in percent: above `scaleOutAbove` the cluster grows, below `scaleInBelow` it may shrink. */
const Thresholds = Type.Object({ scaleOutAbove: Percent, scaleInBelow: Percent }, { additionalProperties: false });

/** The `autoscaler` section of a cluster document. */
export const ScalePolicySchema = Type.Object(
  {
    minClusterSize: Type.Integer({ minimum: 0, maximum: 100_000 }),
    maxClusterSize: Type.Integer({ minimum: 1, maximum: 100_000 }),
    cpu: Type.Optional(Thresholds),
    memory: Type.Optional(Thresholds),
    /** Signals are averaged over this window. */
    windowMs: Type.Optional(Type.Integer({ minimum: 1_000, maximum: 3_600_000 })),
    /** At most one action per cooldown. */
    cooldownMs: Type.Optional(Type.Integer({ minimum: 1_000, maximum: 86_400_000 })),
    /** Which node a scale-in removes. */
    decommissionStrategy: Type.Optional(Type.Union([Type.Literal('newest'), Type.Literal('least-loaded')])),
    /** No action while true; samples are still taken (`fleetplane ctl scale pause|resume` write it). */
    paused: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export type ScalePolicyInput = Static<typeof ScalePolicySchema>;

export interface ScalePolicy {
  minClusterSize: number;
  maxClusterSize: number;
  cpu: { scaleOutAbove: number; scaleInBelow: number };
  memory: { scaleOutAbove: number; scaleInBelow: number };
  windowMs: number;
  cooldownMs: number;
  decommissionStrategy: 'newest' | 'least-loaded';
  paused: boolean;
}

export const POLICY_DEFAULTS = {
  cpu: { scaleOutAbove: 75, scaleInBelow: 25 },
  memory: { scaleOutAbove: 80, scaleInBelow: 40 },
  windowMs: 60_000,
  cooldownMs: 300_000,
  decommissionStrategy: 'newest',
} as const satisfies Partial<ScalePolicy>;

export class PolicyError extends Error {
  constructor(
    /** The offending field, dotted from the policy's root (`cpu.scaleInBelow`). */
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'PolicyError';
  }
}

/**
 * Checks a cluster's scaling policy and fills the defaults. Refused: unknown fields, negative or out-of-range
 * numbers, a cooldown under one second, `minClusterSize` over `maxClusterSize`, and thresholds without a dead
 * band (`scaleInBelow` must be below `scaleOutAbove`, or the cluster would flap).
 */
export function parsePolicy(input: unknown): ScalePolicy {
  const [first] = Value.Errors(ScalePolicySchema, input);
  if (first) {
    const field = first.path.split('/').filter(Boolean).join('.') || 'policy';
    throw new PolicyError(field, first.message === 'Unexpected property' ? 'unknown field' : first.message.toLowerCase());
  }
  const given = input as ScalePolicyInput;
  const policy: ScalePolicy = {
    minClusterSize: given.minClusterSize,
    maxClusterSize: given.maxClusterSize,
    cpu: given.cpu ?? { ...POLICY_DEFAULTS.cpu },
    memory: given.memory ?? { ...POLICY_DEFAULTS.memory },
    windowMs: given.windowMs ?? POLICY_DEFAULTS.windowMs,
    cooldownMs: given.cooldownMs ?? POLICY_DEFAULTS.cooldownMs,
    decommissionStrategy: given.decommissionStrategy ?? POLICY_DEFAULTS.decommissionStrategy,
    paused: given.paused ?? false,
  };
  if (policy.minClusterSize > policy.maxClusterSize) throw new PolicyError('minClusterSize', `must not exceed maxClusterSize (${policy.maxClusterSize})`);
  for (const resource of ['cpu', 'memory'] as const) {
    const { scaleOutAbove, scaleInBelow } = policy[resource];
    if (scaleInBelow >= scaleOutAbove) throw new PolicyError(`${resource}.scaleInBelow`, `must be below ${resource}.scaleOutAbove (${scaleOutAbove}): the band between them keeps the cluster from flapping`);
  }
  return policy;
}
