// How much a peer can make this rank buffer before anyone asked for it: messages that arrive before
// their receive is posted are kept until claimed. A peer past either bound has its connection
// failed (PeerFailureError naming it) instead of growing this process without end.
import { InvalidArgumentError } from '../errors';

export interface UnexpectedLimits {
  /** messages buffered per connection */
  frames: number;
  /** their bytes (as their headers declare them) per connection */
  bytes: number;
}

/**
 * Far above what collectives need (a rank is at most about one op ahead; a 4 GiB tensor is 8192
 * chunks) and what Node can allocate for one tensor (4 GiB): legitimate traffic never meets them.
 */
export const DEFAULT_UNEXPECTED_LIMITS: Readonly<UnexpectedLimits> = { frames: 65_536, bytes: 2 ** 32 };

/** A count, or bytes with a K/M/G suffix (binary units), from a variable; the default when unset. */
function sizeFrom(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined || text.trim() === '') return fallback;
  const m = /^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$/i.exec(text);
  const n = m ? Number(m[1]) * { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g'] : NaN;
  if (!(n >= 1) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError(`${name} must be a positive number (suffix K, M or G allowed), got ${JSON.stringify(text)}`);
  return n;
}

/** CMESH_MAX_UNEXPECTED_FRAMES and CMESH_MAX_UNEXPECTED_BYTES, else the defaults. */
export function unexpectedLimits(env: NodeJS.ProcessEnv = process.env): UnexpectedLimits {
  return {
    frames: sizeFrom('CMESH_MAX_UNEXPECTED_FRAMES', env.CMESH_MAX_UNEXPECTED_FRAMES, DEFAULT_UNEXPECTED_LIMITS.frames),
    bytes: sizeFrom('CMESH_MAX_UNEXPECTED_BYTES', env.CMESH_MAX_UNEXPECTED_BYTES, DEFAULT_UNEXPECTED_LIMITS.bytes),
  };
}
