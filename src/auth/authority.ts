import type { EnvelopeFields } from './permissions.js';

/**
 * SPEC 8.4: methods that act on the server itself (its processes, ingress, host and cluster storage), whoever's
 * organization the caller is. Only keys of the platform organization may call them. `metrics.read` is the
 * whole server's figures, every tenant's load included: the platform's too (unless `metrics.public`). The upload
 * reservations of the cluster's repositories (SPEC 14.3) are the platform's records, and the autoscaler
 * (SPEC 14.4) scales the platform's servers. The overview (the dashboard's data and event stream) shows every
 * process, organization and event of the server. The server's certificates (`tls.*`) are the platform's too.
 */
const SERVER_METHODS = /^(cordon|drain|shed|restart|reboot|shutdown|storage(\..+)?|metrics\.read|repository\.reservations(\..+)?|autoscaler(\..+)?|overview(\..+)?|tls(\..+)?)$/;

/**
 * Methods only this server's own processes send, a level above the platform's: `overview.emit` carries a
 * primary's journal entry to the workers whose sockets watch the fleet, on its server and on its mesh peers. No
 * caller sends one, whatever its key (a platform admin's included) and whichever way it comes in (HTTP, the
 * WebSocket, the control socket, a workflow step): an entry a caller wrote would be shown as something that
 * happened.
 */
const INTERNAL_METHODS: ReadonlySet<string> = new Set(['overview.emit']);

/** Targets that select processes by position rather than by organization: platform keys only. */
export const SERVER_TARGETS = ['master', 'worker', 'server', 'cluster', 'broadcast'] as const;

export function isServerMethod(method: string): boolean {
  return SERVER_METHODS.test(method);
}

/** Why no caller may send this method, or undefined when it is not internal (its permissions then decide). */
export function internalViolation(method: string): string | undefined {
  return INTERNAL_METHODS.has(method) ? `"${method}" is internal: only the server's own processes send it, and no key may` : undefined;
}

/** The first server-level target the envelope names (`master: false` names none), if any. */
export function serverTarget(envelope: Readonly<Record<string, unknown>>): string | undefined {
  return SERVER_TARGETS.find((field) => envelope[field] !== undefined && envelope[field] !== false);
}

/**
 * Why a caller outside the platform organization may not send this envelope, or undefined when it may.
 * Permissions are evaluated before this; this is the level above them that no tenant grant can lift.
 */
export function tenantViolation(envelope: EnvelopeFields): string | undefined {
  if (isServerMethod(envelope.method)) return `"${envelope.method}" acts on the server itself; only the platform organization may call it`;
  const target = serverTarget(envelope);
  if (target) return `the "${target}" target selects server processes; only the platform organization may use it (a tenant's envelopes are scoped to its organization)`;
  return undefined;
}
