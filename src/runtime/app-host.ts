import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';

/**
 * What a worker (or the primary in single-process mode) serves: HTTP servers that never listen themselves —
 * the primary hands them accepted connections — and a way to close the application.
 */
export interface AppHost {
  http: HttpServer;
  https?: HttpsServer;
  close(): Promise<void>;
}
