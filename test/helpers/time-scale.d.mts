export interface TimeScale {
  factor: number;
  source: 'variable' | 'load' | 'default';
  load: number;
  cpus: number;
}

export const SCALE_VARIABLE: string;
export const MAX_AUTO_SCALE: number;
export function resolveTimeScale(value: string | undefined, load: number, cpus: number): TimeScale;
export const TIME_SCALE: TimeScale;
export const SCALE: number;
export function scaled(ms: number): number;
export function describeTimeScale(scale?: TimeScale): string;
