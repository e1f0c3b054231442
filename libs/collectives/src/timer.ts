// Node's timers hold at most 2^31-1 ms (about 24.8 days): a longer delay fires after 1 ms, so a
// huge timeout would time out at once and make healthy peers look lost. Every timer built from a
// caller's or a peer's value goes through timerMs().

/** The longest delay a Node timer holds. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delay for setTimeout: negative or NaN is 0, and longer than MAX_TIMER_MS waits MAX_TIMER_MS. */
export function timerMs(ms: number): number {
  return ms > 0 ? Math.min(ms, MAX_TIMER_MS) : 0;
}
