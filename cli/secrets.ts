import { loadConfig } from '../src/config/load.js';
import type { StoreConfig } from '../src/db/open.js';
import { SecretKeyError } from '../src/secrets/errors.js';
import { secretsKeyFile } from '../src/secrets/key-file.js';
import { SecretKeyring } from '../src/secrets/keyring.js';
import { RotationRefusedError, rotateSecrets, type RotationResult } from '../src/secrets/rotate.js';
import { withStore } from './init.js';
import { CliError } from './usage.js';

/** A key problem as the command's one line: a bad variable is bad input (2), a bad key file stops the command (1). */
export function asCliError(error: SecretKeyError): CliError {
  return new CliError(error.message, error.source === 'env' ? 2 : 1);
}

/** The keyring `start` would use for this config, checked now. */
export function keyringFor(config: StoreConfig, env: NodeJS.ProcessEnv = process.env): SecretKeyring {
  try {
    return SecretKeyring.fromEnvironment(secretsKeyFile(config), env);
  } catch (error) {
    if (error instanceof SecretKeyError) throw asCliError(error);
    throw error;
  }
}

function describe(result: RotationResult): string {
  const lines =
    result.keySource === 'file'
      ? [
          `sealed ${result.resealed} secret${result.resealed === 1 ? '' : 's'} with new key ${result.keyId} (${result.plaintext} of them stored in plain text before)`,
          `${result.keyFile} now holds only key ${result.keyId} (mode 0600)${result.retiredKeyIds.length ? `; retired ${result.retiredKeyIds.join(', ')}` : ''}`,
          'running servers read the changed key file on their next use of a secret: no restart needed; back up the new key file with the store',
        ]
      : [
          `sealed ${result.resealed} secret${result.resealed === 1 ? '' : 's'} with FLEETPLANE_SECRETS_KEY (key ${result.keyId}; ${result.plaintext} of them stored in plain text before)`,
          result.retiredKeyIds.length
            ? `nothing is sealed with FLEETPLANE_SECRETS_PREVIOUS_KEY (key ${result.retiredKeyIds.join(', ')}) any more: once every server runs with the new FLEETPLANE_SECRETS_KEY, remove it`
            : 'to rotate, set FLEETPLANE_SECRETS_PREVIOUS_KEY to the current key and FLEETPLANE_SECRETS_KEY to a new one, here and on every server, then run this again',
        ];
  for (const location of result.unreadable) {
    lines.push(`unreadable: ${location.collection} "${location.name}" (organization ${location.organization_id}) ${location.field} does not open with any key and was left as it is; set it again`);
  }
  return `${lines.join('\n')}\n`;
}

/** `fleetplane keys rotate-secrets`: see src/secrets/rotate.ts for the order of the steps. */
export async function rotateSecretsCommand(values: { config?: string; 'data-dir'?: string; json?: boolean }, out: NodeJS.WritableStream): Promise<void> {
  // The keys are checked before the store is opened: a bad key refuses the command with nothing changed.
  keyringFor(loadConfig({ flags: { config: values.config, dataDir: values['data-dir'] } }).config);
  await withStore(values, async (store, config) => {
    let result: RotationResult;
    try {
      result = await rotateSecrets(store, { keyFile: secretsKeyFile(config), env: process.env });
    } catch (error) {
      if (error instanceof SecretKeyError) throw asCliError(error);
      if (error instanceof RotationRefusedError) throw new CliError(error.message, 1);
      throw error;
    }
    if (values.json) {
      out.write(
        `${JSON.stringify({
          key_id: result.keyId,
          retired_key_ids: result.retiredKeyIds,
          resealed: result.resealed,
          plaintext: result.plaintext,
          unreadable: result.unreadable,
          key_source: result.keySource,
          ...(result.keyFile ? { key_file: result.keyFile } : {}),
        })}\n`,
      );
      return;
    }
    out.write(describe(result));
  });
}
