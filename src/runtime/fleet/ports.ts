import type { ConnectionHandle } from '../listeners.js';
import type { PrimaryToWorker, WorkerToPrimary } from '../messages.js';

/** One forked worker process as the fleet drives it: its IPC channel, its signals and its life events. */
export interface WorkerHandle {
  /** -1 when the operating system gave the process no pid (the spawn failed after the fork call returned). */
  readonly pid: number;
  isConnected(): boolean;
  /** Throws when the channel is already closed. */
  send(message: PrimaryToWorker): void;
  /** Sends a message with an accepted connection; `written` runs once it is written (error: not sent). */
  sendConnection(message: PrimaryToWorker, connection: ConnectionHandle, written: (error: Error | null) => void): void;
  kill(signal: NodeJS.Signals): void;
  onOnline(listener: () => void): void;
  onMessage(listener: (message: WorkerToPrimary | unknown) => void): void;
  onError(listener: (error: Error) => void): void;
  /** The IPC channel closed: the first sign of a worker's death (it comes before the exit is reaped). */
  onDisconnect(listener: () => void): void;
  onExit(listener: (code: number | null, signal: string | null) => void): void;
}

/** How the fleet starts a worker process; throws when the fork itself fails (EMFILE, ENOMEM...). */
export interface ForkPort {
  forkWorker(env: Record<string, string>): WorkerHandle;
}

/** Where the fleet records the exit code the primary process should end with (1 while it cannot serve). */
export interface ExitCodeSink {
  setExitCode(code: number): void;
}
