// A chore that runs at most once per period, on the service's tick: due() says whether it is
// time (and, when it is, starts the next period). The first call is due at any real clock time.
export class Cadence {
  private last = 0;

  constructor(readonly periodMs: number) {}

  due(now: number): boolean {
    if (now - this.last <= this.periodMs) return false;
    this.last = now;
    return true;
  }
}
