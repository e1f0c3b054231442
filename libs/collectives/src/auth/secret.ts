// The run's shared secret (CMESH_SECRET, or the `secret` option): the key of the challenge every
// TcpStore and data-plane connection answers before anything else crosses it.
import { randomBytes } from 'crypto';
import { InvalidArgumentError } from '../errors';

/** The variable `cmesh run` sets for its workers, and that a rank started another way may set. */
export const SECRET_ENV = 'CMESH_SECRET';
/** Shorter secrets are refused: a guessable key protects nothing. */
export const MIN_SECRET_CHARS = 16;

/** A fresh secret: 32 random bytes, base64url (what `cmesh run` generates per run). */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The key to use: the explicit secret, else CMESH_SECRET, else none (no authentication). `what`
 * names the setting in errors; the value itself never appears in one.
 */
export function resolveSecret(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env, what = 'secret'): Buffer | undefined {
  const fromEnv = env.CMESH_SECRET;
  const value = explicit ?? (fromEnv === '' ? undefined : fromEnv);
  const name = explicit !== undefined ? what : SECRET_ENV;
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${name} must be a string`);
  if (value.length < MIN_SECRET_CHARS) {
    throw new InvalidArgumentError(`${name} is too short (${value.length} characters; at least ${MIN_SECRET_CHARS}, e.g. 32 random bytes in base64)`);
  }
  return Buffer.from(value, 'utf8');
}
