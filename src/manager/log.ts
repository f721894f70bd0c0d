/** Where the manager reports; never given a key (lines name servers, clusters, providers and codes). */
export interface ManagerLog {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
}
