// Comparing a secret a client sent with one the coordinator holds, in constant time: both are
// compared as SHA-256 digests, of equal length, so timingSafeEqual says nothing about the lengths.
import { createHash, timingSafeEqual } from 'crypto';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether `given` equals `held` (false when nothing is held). */
export function sameSecret(given: string, held: string | undefined): boolean {
  return held !== undefined && timingSafeEqual(digest(given), digest(held));
}
