import { parsePolicy, PolicyError } from '../autoscaler/policy.js';
import { CRUD_ERRORS } from './errors.js';

/**
 * SPEC 14.4: the `autoscaler` section of a cluster document is the cluster's scaling policy. A bad one is
 * refused where it is written (400 naming the field), so the policy in force is always a valid one.
 */
export function assertClusterPolicy(document: Record<string, unknown>, where = ''): void {
  if (!Object.hasOwn(document, 'autoscaler')) return;
  try {
    parsePolicy(document.autoscaler);
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    throw CRUD_ERRORS.invalidPolicy(`${where}autoscaler.${error.message}`);
  }
}
