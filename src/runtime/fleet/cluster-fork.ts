import cluster from 'node:cluster';
import type { ForkPort, WorkerHandle } from './ports.js';

export interface ClusterForkOptions {
  /** Script the workers run (default: the primary's own entry script). */
  exec: string | undefined;
  args: string[];
  execArgv: string[];
}

/** The fork port of a real primary: Node's cluster module. */
export function clusterForkPort(options: ClusterForkOptions): ForkPort {
  return {
    forkWorker(env): WorkerHandle {
      cluster.setupPrimary({ ...options, silent: false });
      const worker = cluster.fork(env);
      return {
        pid: worker.process.pid ?? -1,
        isConnected: () => worker.isConnected(),
        send: (message) => void worker.send(message),
        sendConnection: (message, connection, written) => void worker.send(message, connection as never, written),
        kill: (signal) => void worker.process.kill(signal),
        onOnline: (listener) => void worker.on('online', listener),
        onMessage: (listener) => void worker.on('message', listener),
        onError: (listener) => void worker.on('error', listener),
        onDisconnect: (listener) => void worker.on('disconnect', listener),
        onExit: (listener) => void worker.on('exit', listener),
      };
    },
  };
}
