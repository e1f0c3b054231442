// The jobs module's one source of time: the policies take `now` as a parameter, and the service
// reads it from an injected Clock, so tests can drive time without waiting on timers.
export interface Clock {
  /** milliseconds since the epoch */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
