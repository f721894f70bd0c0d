export const RUN_VARIABLE: string;
export function currentRun(): string;
export function markedProcesses(run?: string): Array<{ pid: number; run: string; command: string }>;
export function killLeftovers(which: { run?: string; stale?: boolean }): Array<{ pid: number; run: string; command: string }>;
