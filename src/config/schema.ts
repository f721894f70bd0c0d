import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ShutdownSection } from './shutdown-section.js';

const Ms = (defaultMs: number, description: string) =>
  Type.Integer({ minimum: 0, default: defaultMs, description });

export const WorkerCount = Type.Union([Type.Literal('auto'), Type.Integer({ minimum: 0, maximum: 256 })], {
  description: "'auto', a number of workers, or 0 for single-process mode",
});

export const WorkersSection = Type.Object(
  {
    count: Type.Union([Type.Literal('auto'), Type.Integer({ minimum: 0, maximum: 256 })], {
      default: 'auto',
      description: "'auto' (WEB_CONCURRENCY, else CPUs within the cgroup limit), N, or 0 = single process",
    }),
    maxRssMb: Type.Integer({ minimum: 0, default: 0, description: 'Recycle a worker above this RSS (0 = off)' }),
    maxAgeMs: Ms(0, 'Recycle a worker older than this (0 = off)'),
    execArgv: Type.Array(Type.String(), { default: [], description: 'Node.js flags for workers (code-loading, debugger and diagnostic flags refused)' }),
    env: Type.Record(Type.String(), Type.String(), { default: {}, description: 'Extra environment for workers' }),
    readyTimeoutMs: Ms(30_000, 'A worker not ready by then is treated as a boot failure'),
  },
  { additionalProperties: false, default: {} },
);

export const ConfigSchema = Type.Object(
  {
    dataDir: Type.String({ minLength: 1, default: './data', description: 'Embedded database, server identity, admin key' }),
    server: Type.Object(
      {
        id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$', description: 'Stable server id (default: persisted in the data directory)' })),
        cluster: Type.String({ minLength: 1, default: 'default', description: 'Cluster group this server belongs to' }),
        publicUrl: Type.Optional(Type.String({ minLength: 1, description: 'Base URL peers and load balancers use to reach this server' })),
        organization: Type.Optional(
          Type.String({ minLength: 1, maxLength: 256, description: 'Platform organization (id) that owns this server (default: the organization created by init or the first start)' }),
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    http: Type.Object(
      {
        port: Type.Integer({ minimum: 0, maximum: 65_535, default: 8080, description: 'HTTP port' }),
        host: Type.String({ default: '0.0.0.0', description: 'HTTP bind address' }),
        keepAliveTimeoutMs: Ms(72_000, 'Idle keep-alive connections are closed after this'),
        headersTimeoutMs: Type.Integer({
          minimum: 0,
          maximum: 300_000,
          default: 30_000,
          description: 'A connection that has not sent complete request headers this long after connecting (or after the first byte of its next request) is answered 408 and closed (0 = off)',
        }),
        bodyTimeoutMs: Type.Integer({
          minimum: 0,
          maximum: 300_000,
          default: 30_000,
          description: 'A request whose body is not complete this long after its headers arrived is answered 408 and its connection closed (0 = off)',
        }),
        maxIncompletePerAddress: Type.Integer({
          minimum: 0,
          default: 32,
          description:
            'Connections of one client address (per worker) still sending their first request headers, and, counted apart, requests of that address whose body is still arriving; past it the oldest is answered 408 and closed (0 = no cap; trusted proxies are exempt)',
        }),
        trustProxy: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
          default: [],
          maxItems: 256,
          description: 'Proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client address; empty = trust none',
        }),
        cors: Type.Object(
          {
            origins: Type.Array(Type.String({ minLength: 1, maxLength: 256, pattern: '^https?://[^/\\s]+$' }), {
              default: [],
              maxItems: 256,
              description: 'Browser origins (scheme://host[:port]) allowed to call this server cross-origin; empty = CORS off',
            }),
            maxAgeS: Type.Integer({ minimum: 0, maximum: 86_400, default: 600, description: 'How long a browser may cache a preflight answer' }),
          },
          { additionalProperties: false, default: {} },
        ),
        compression: Type.Object(
          {
            enabled: Type.Boolean({ default: true, description: 'Compress JSON and text replies (br or gzip, as the client accepts)' }),
            thresholdBytes: Type.Integer({ minimum: 0, default: 1024, description: 'Replies smaller than this are sent as they are' }),
          },
          { additionalProperties: false, default: {} },
        ),
        static: Type.Object(
          {
            root: Type.Optional(Type.String({ minLength: 1, description: 'Directory of static files the workers serve (default: none)' })),
            prefix: Type.String({ minLength: 1, maxLength: 256, pattern: '^/([A-Za-z0-9._~-]+/)*$', default: '/static/', description: 'URL prefix of the static files' }),
          },
          { additionalProperties: false, default: {} },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    https: Type.Object(
      {
        port: Type.Integer({ minimum: 0, maximum: 65_535, default: 8443, description: 'HTTPS port (on only when key and cert are set)' }),
        key: Type.Optional(Type.String({ minLength: 1, description: 'Path to the TLS private key (PEM)' })),
        cert: Type.Optional(Type.String({ minLength: 1, description: 'Path to the TLS certificate chain (PEM)' })),
      },
      { additionalProperties: false, default: {} },
    ),
    workers: WorkersSection,
    restart: Type.Object(
      {
        backoffMs: Ms(200, 'First restart delay after a crash'),
        maxBackoffMs: Ms(30_000, 'Restart delay upper bound'),
        backoffMultiplier: Type.Number({ minimum: 1, maximum: 10, default: 2, description: 'Growth of the restart delay per crash' }),
        stabilityWindowMs: Ms(30_000, 'Crash-free time online that resets the backoff'),
        crashThreshold: Type.Integer({ minimum: 1, default: 5, description: 'Crashes inside crashWindowMs that trip the circuit breaker' }),
        crashWindowMs: Ms(60_000, 'Sliding window for crash counting'),
        bootFailQuarantine: Type.Integer({ minimum: 0, default: 3, description: 'Consecutive boot failures of one slot before it is quarantined while others serve (0 = off)' }),
      },
      { additionalProperties: false, default: {} },
    ),
    shutdown: ShutdownSection,
    health: Type.Object(
      {
        heartbeatMs: Ms(5_000, 'Worker health report interval (0 = off)'),
        wedgedTimeoutMs: Ms(0, 'Recycle a worker silent this long (0 = off, ≥ 2 × heartbeatMs)'),
        degradedAfterMs: Ms(0, 'Fewer workers than the target for this long fires fleet:degraded (0 = at once)'),
        maxEventLoopLagMs: Ms(0, 'Recycle after lagRecycleBeats beats above this lag (0 = off)'),
        lagRecycleBeats: Type.Integer({ minimum: 1, default: 3, description: 'Consecutive laggy beats before a lag recycle' }),
        lagSpikeMs: Ms(0, 'Recycle on one beat above this lag (0 = off)'),
      },
      { additionalProperties: false, default: {} },
    ),
    fallback: Type.Object(
      {
        redirect: Type.Optional(Type.String({ minLength: 1, description: "Load balancer's base URL for the 307 fallback: an absolute http:// or https:// URL (https://lb.example.com)" })),
        retryAfterS: Type.Integer({ minimum: 1, maximum: 3600, default: 5, description: 'Retry-After of the 503 fallback' }),
      },
      { additionalProperties: false, default: {} },
    ),
    db: Type.Object(
      {
        path: Type.Optional(Type.String({ minLength: 1, description: 'SQLite file of the embedded store (default <dataDir>/fleetplane.db)' })),
        lockTimeoutMs: Type.Integer({
          minimum: 1,
          maximum: 600_000,
          default: 5_000,
          description: 'How long an operation on the embedded store waits for a lock another process holds before failing with 503 store_unavailable',
        }),
        maxCollectionsPerOrganization: Type.Integer({
          minimum: 1,
          maximum: 10_000,
          default: 100,
          description: 'Collections an organization may create through /crud besides the standard ones (400 beyond it)',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    postgres: Type.Object(
      {
        url: Type.Optional(
          Type.String({
            minLength: 1,
            description: 'PostgreSQL connection string (postgres://user:password@host:5432/database, 14 or later); when set the store uses PostgreSQL instead of the embedded SQLite file (not together with mongodb.url)',
          }),
        ),
        maxPoolSize: Type.Integer({
          minimum: 1,
          maximum: 100,
          default: 4,
          description: "Pooled connections per process (the primary and each worker), besides one for the change feed: servers × (1 + workers) × (maxPoolSize + 1) must stay below the PostgreSQL server's max_connections (docs/postgres.md)",
        }),
        connectTimeoutMs: Type.Integer({ minimum: 1, default: 5_000, description: 'How long opening a connection may take before the operation fails with 503 store_unavailable' }),
        operationTimeoutMs: Type.Integer({
          minimum: 1,
          default: 5_000,
          description: "How long a write waits for another writer's lock on its collection; every operation answers within the longer of this and connectTimeoutMs plus 3 s (8 s by default), a store that no longer answers included, then 503 store_unavailable",
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    mongodb: Type.Object(
      {
        url: Type.Optional(Type.String({ minLength: 1, description: 'MongoDB connection string (a replica set, 5.0 or later); when set the store uses MongoDB instead of the embedded SQLite file' })),
        database: Type.Optional(Type.String({ minLength: 1, description: "MongoDB database name (default: the connection string's, else fleetplane)" })),
        serverSelectionTimeoutMs: Type.Integer({ minimum: 1, default: 5_000, description: 'How long an operation looks for a reachable primary before failing with 503 store_unavailable' }),
        socketTimeoutMs: Type.Integer({ minimum: 1, default: 10_000, description: 'A connection silent this long (a stalled server) fails its operation' }),
        operationTimeoutMs: Type.Integer({ minimum: 1, default: 5_000, description: 'Server-side time limit of each read and deadline of each write transaction, retries included' }),
        maxPoolSize: Type.Integer({ minimum: 1, maximum: 1000, default: 10, description: 'Connections per process (the primary and each worker)' }),
      },
      { additionalProperties: false, default: {} },
    ),
    lifecycle: Type.Object(
      {
        hostControl: Type.Boolean({ default: false, description: 'Allow reboot/shutdown envelopes to run the host commands below' }),
        rebootCommand: Type.Array(Type.String(), { minItems: 1, default: ['systemctl', 'reboot'], description: 'argv run by a confirmed reboot (no shell)' }),
        shutdownCommand: Type.Array(Type.String(), { minItems: 1, default: ['systemctl', 'poweroff'], description: 'argv run by a confirmed shutdown (no shell)' }),
        restartExitCode: Type.Integer({ minimum: 1, maximum: 255, default: 75, description: 'Exit code of a primary restart, so the service manager starts it again' }),
        readinessGraceMs: Ms(5_000, 'Before the last serving workers are cordoned, drained or stopped, /readyz answers 503 this long while traffic is still served; the autoscaler also waits this long between a removed server\'s terminating record and the provider request (0 = off)'),
      },
      { additionalProperties: false, default: {} },
    ),
    node: Type.Object(
      {
        host: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: "This node's host name as the edge should route to it (default: the host of server.publicUrl, else the OS host name)" })),
        publicIp: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Public address of this node (default: from the instance metadata endpoint, else none)' })),
        privateIp: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Private address of this node (default: from the instance metadata endpoint, else the first non-internal IPv4)' })),
        location: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Free-form location label (default: the region and zone the metadata endpoint reports)' })),
        provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Infrastructure provider name recorded for this node' })),
        region: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Provider region' })),
        instanceId: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "Provider's id of this instance" })),
        metadata: Type.Object(
          {
            kind: Type.Union([Type.Literal('none'), Type.Literal('aws'), Type.Literal('gcp'), Type.Literal('digitalocean')], { default: 'none', description: 'Instance metadata protocol to query for the fields above that are not set (none = ask nothing)' }),
            url: Type.Optional(Type.String({ minLength: 1, pattern: '^https?://', description: 'Base URL of the instance metadata endpoint (default: the documented one of the kind)' })),
            timeoutMs: Ms(2_000, 'Longest wait for the metadata endpoint'),
          },
          { additionalProperties: false, default: {} },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    routing: Type.Object(
      {
        enabled: Type.Boolean({ default: true, description: 'Run the routing workflow after readiness and send its removal request at graceful stop' }),
        workflow: Type.String({ minLength: 1, maxLength: 128, default: 'configure-cluster-routing', description: 'Routing workflow of the platform organization' }),
      },
      { additionalProperties: false, default: {} },
    ),
    repositories: Type.Object(
      {
        projectRoot: Type.Optional(Type.String({ minLength: 1, description: 'Directory relative localFsRoot values resolve against (default: the working directory)' })),
        stateDir: Type.Optional(Type.String({ minLength: 1, description: 'Credential helpers and SSH keys of repositories, outside every checkout (default: <dataDir>/repositories)' })),
        uploadCommand: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'argv of the initial upload, run in the checkout (no shell)' })),
        uploadTimeoutMs: Ms(600_000, 'Longest run of the initial upload command'),
      },
      { additionalProperties: false, default: {} },
    ),
    organizations: Type.Object(
      {
        graceMs: Ms(60_000, 'After the last WebSocket of an organization closes, how long until it is inactive'),
      },
      { additionalProperties: false, default: {} },
    ),
    ipc: Type.Object(
      {
        maxEnvelopeBytes: Type.Integer({ minimum: 1024, maximum: 16 * 1024 * 1024, default: 1024 * 1024, description: 'Largest envelope accepted (serialized JSON)' }),
        requestTimeoutMs: Ms(5_000, 'Default time request() waits for replies'),
      },
      { additionalProperties: false, default: {} },
    ),
    mesh: Type.Object(
      {
        enabled: Type.Boolean({ default: true, description: 'Join the mesh of this cluster group (it forms only with a secret or mutual TLS)' }),
        port: Type.Integer({ minimum: 0, maximum: 65_535, default: 8090, description: 'Mesh port for peer WebSockets (internal)' }),
        host: Type.String({ default: '0.0.0.0', description: 'Mesh bind address' }),
        url: Type.Optional(Type.String({ minLength: 1, pattern: '^wss?://', description: 'URL peers dial to reach this mesh port (default: derived from host, port and server.publicUrl)' })),
        secret: Type.Optional(Type.String({ minLength: 16, description: "The cluster's shared mesh secret (HMAC handshake); required to form a mesh unless mutual TLS is configured" })),
        tls: Type.Object(
          {
            key: Type.Optional(Type.String({ minLength: 1, description: 'Private key of this server (PEM); with cert and ca: mutual TLS' })),
            cert: Type.Optional(Type.String({ minLength: 1, description: 'Certificate of this server (PEM)' })),
            ca: Type.Optional(Type.String({ minLength: 1, description: 'CA that signed every peer certificate (PEM)' })),
            mode: Type.Union([Type.Literal('files'), Type.Literal('auto')], {
              default: 'files',
              description: "'files': mutual TLS from key, cert and ca; 'auto': the cluster's CA (made on first start, kept in the store) issues each server a short-lived certificate",
            }),
            lifetimeMs: Type.Integer({ minimum: 10_000, default: 21_600_000, description: "'auto': how long a server's mesh certificate is valid; it is renewed when a third of that is left" }),
          },
          { additionalProperties: false, default: {} },
        ),
        discoveryIntervalMs: Ms(30_000, 'Re-read the servers inventory this often (inventory changes are also seen within about a second)'),
        pingIntervalMs: Ms(10_000, 'Ping each peer this often'),
        pongTimeoutMs: Ms(10_000, 'A peer that does not answer a ping within this is disconnected'),
        maxBufferedBytes: Type.Integer({ minimum: 1024, default: 8 * 1024 * 1024, description: 'Per-link send buffer cap: past it sends fail with an error' }),
        maxFrameBytes: Type.Integer({ minimum: 4096, maximum: 64 * 1024 * 1024, default: 4 * 1024 * 1024, description: 'Largest frame accepted from a peer; larger ones are refused with an error' }),
        reconnect: Type.Object(
          {
            baseMs: Ms(1_000, 'Reconnect delay before jitter: baseMs × 1.5^attempt'),
            maxDelayMs: Ms(30_000, 'Cap of the reconnect delay before jitter'),
            jitterMinMs: Ms(500, 'Smallest random delay added to each reconnect'),
            jitterMaxMs: Ms(4_500, 'Largest random delay added to each reconnect'),
            maxAttempts: Type.Integer({ minimum: 1, default: 10, description: 'Reconnect attempts until the next discovery' }),
          },
          { additionalProperties: false, default: {} },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    manager: Type.Object(
      {
        organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "The parent's platform organization that manages this server (default: the server's inventory record; none = unmanaged)" })),
        host: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description: 'The parent: a host name (reached over https) or an explicit http(s) URL; envelopes go to <host>/manager' })),
        apiKey: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'Key of the parent that this server sends its envelopes with (prefer FLEETPLANE_MANAGER_API_KEY or a 0600 config file)' })),
        timeoutMs: Ms(3_000, 'Longest a request to the parent may take'),
        startupTimeoutMs: Ms(120_000, 'Parent: how long a created server has to confirm it runs before its id is logged'),
        cleanupDelayMs: Ms(60_000, 'Parent: how long after terminating a managed server its inventory records are deleted'),
        createWorkflow: Type.String({ minLength: 1, maxLength: 64, default: 'create-organization-server', description: 'Parent: workflow that asks a provider for a new server' }),
        terminateWorkflow: Type.String({ minLength: 1, maxLength: 64, default: 'terminate-organization-server', description: 'Parent: workflow that asks a provider to end a server' }),
        activation: Type.Boolean({ default: true, description: 'Parent: create a server when a tenant organization with a managed cluster becomes active and none runs' }),
        localRoot: Type.Optional(Type.String({ minLength: 1, description: 'Parent: directory of the data directories of servers the built-in local provider starts (default: the system temp directory)' })),
        localConfig: Type.Optional(
          Type.Record(Type.String(), Type.Unknown(), {
            description: 'Parent: config of every server the built-in local provider starts (what a cloud image would hold: autoscaler, shutdown timings), under the fields the provider sets itself',
          }),
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    autoscaler: Type.Object(
      {
        enabled: Type.Boolean({ default: false, description: "Run the autoscaler of this server's cluster (its policy: the cluster document's autoscaler section)" }),
        intervalMs: Type.Integer({ minimum: 100, default: 10_000, description: 'How often the autoscaler samples this server and, on the deciding server, evaluates the policy' }),
        sweepIntervalMs: Type.Integer({ minimum: 1_000, default: 600_000, description: "How often terminating inventory records of this server's cluster are deleted (the first sweep after one interval)" }),
        maxClockSkewMs: Type.Integer({
          minimum: 0,
          maximum: 60_000,
          default: 1_000,
          description: "Largest clock difference assumed between the hosts sharing the cluster's store: the decider lease is taken over only this long after it expired",
        }),
        powerOffOnRemoval: Type.Boolean({
          default: false,
          description: 'When the autoscaler removes this server: after its graceful stop, run lifecycle.shutdownCommand to power the host off (needs lifecycle.hostControl)',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    auth: Type.Object(
      {
        failureLimit: Type.Object(
          {
            max: Type.Integer({ minimum: 0, default: 20, description: 'Failed authentications a client address may make at once before 429 (0 = no limit)' }),
            windowMs: Type.Integer({ minimum: 1, default: 10_000, description: 'Time in which a spent allowance refills: one more failure every windowMs / max' }),
            maxAddresses: Type.Integer({ minimum: 1, default: 10_000, description: 'Client addresses tracked per process; the least recently failing one is forgotten first' }),
            delayMs: Type.Integer({ minimum: 0, maximum: 10_000, default: 500, description: 'How long a 429 is held before it is sent, so a client retrying at once is slowed down (0 = at once)' }),
          },
          { additionalProperties: false, default: {} },
        ),
        refusalFloorMs: Type.Integer({
          minimum: 0,
          maximum: 1_000,
          default: 5,
          description: 'A refused key, host or request without a key is answered no sooner than this after it arrived, so how long the checks took cannot tell which failed (0 = at once)',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    egress: Type.Object(
      {
        allow: Type.Array(Type.String({ minLength: 1, maxLength: 253 }), {
          default: [],
          maxItems: 1024,
          description: 'Addresses, CIDR ranges and host names (`*.example.internal` for its hosts) that tenant providers may reach although they are loopback, private, link-local or this server\'s own',
        }),
        platform: Type.Union([Type.Literal('unrestricted'), Type.Literal('restricted')], {
          default: 'unrestricted',
          description: "The platform organization's providers: connect anywhere (unrestricted), or follow the same policy as tenants' (restricted)",
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    metrics: Type.Object(
      {
        public: Type.Boolean({ default: false, description: 'Serve /metrics without a key' }),
      },
      { additionalProperties: false, default: {} },
    ),
    log: Type.Object(
      {
        level: Type.Union(
          ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
          { default: 'info', description: 'pino log level' },
        ),
        requests: Type.Boolean({ default: false, description: 'Log every HTTP request and response (access log)' }),
        format: Type.Union([Type.Literal('auto'), Type.Literal('json'), Type.Literal('pretty')], {
          default: 'auto',
          description: 'How log records are written: one JSON object per line (json), one readable line (pretty), or pretty when stdout is a terminal and json otherwise (auto)',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
  },
  { additionalProperties: false },
);

export type ResolvedConfig = Static<typeof ConfigSchema>;

type DeepPartial<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;

/** What a user writes: every field optional; `workers` may also be the bare count. */
export type FleetplaneConfig = Omit<DeepPartial<ResolvedConfig>, 'workers'> & {
  workers?: DeepPartial<ResolvedConfig['workers']> | ResolvedConfig['workers']['count'];
};

/** Leaf paths of the schema (`http.port`, `dataDir`), used for env names and did-you-mean hints. */
export function leafPaths(schema: TSchema = ConfigSchema, prefix = ''): string[] {
  if (schema.type !== 'object' || !schema.properties) return [prefix];
  return Object.entries(schema.properties as Record<string, TSchema>).flatMap(([key, child]) =>
    leafPaths(child, prefix ? `${prefix}.${key}` : key),
  );
}
