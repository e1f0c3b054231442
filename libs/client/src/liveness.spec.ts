// Liveness with its own connection's state: nobody is judged while the connection is down, everyone
// gets a fresh window once it is back, and a connection down past the outage bound ends it (onOutage).
import { Liveness, OwnConnection } from './liveness';

class FakeConnection implements OwnConnection {
  downSince: number | null = null;
  private readonly ls = new Set<(up: boolean) => void>();
  outageMs(now = Date.now()): number | null {
    return this.downSince === null ? null : now - this.downSince;
  }
  onChange(l: (up: boolean) => void): () => void {
    this.ls.add(l);
    return () => this.ls.delete(l);
  }
  set(up: boolean): void {
    this.downSince = up ? null : Date.now();
    for (const l of this.ls) l(up);
  }
}

describe('Liveness and its own connection', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('judges nobody while down, gives everyone a fresh window when back, and ends past the outage bound', () => {
    const conn = new FakeConnection();
    const lost: string[] = [];
    const outages: number[] = [];
    const l = new Liveness(
      2,
      (r, role) => lost.push(`${role}:${r}`),
      3000,
      conn,
      (ms) => outages.push(ms),
      10_000,
    );
    l.start();
    conn.set(false);
    jest.advanceTimersByTime(6000);
    expect(lost).toEqual([]);
    conn.set(true);
    // nobody heard for 6 s, but the window starts again at the reconnect
    jest.advanceTimersByTime(2500);
    expect(lost).toEqual([]);
    jest.advanceTimersByTime(1000);
    expect(lost).toEqual(['member:0']);
    l.stop();
  });

  it('a connection down longer than the bound ends it once, with how long', () => {
    const conn = new FakeConnection();
    const lost: string[] = [];
    const outages: number[] = [];
    const l = new Liveness(
      2,
      (r, role) => lost.push(`${role}:${r}`),
      3000,
      conn,
      (ms) => outages.push(ms),
      10_000,
    );
    l.start();
    conn.set(false);
    jest.advanceTimersByTime(9500);
    expect(outages).toEqual([]);
    jest.advanceTimersByTime(1500);
    expect(outages.length).toBe(1);
    expect(outages[0]).toBeGreaterThan(10_000);
    expect(outages[0]).toBeLessThanOrEqual(10_500);
    jest.advanceTimersByTime(10_000);
    expect(outages.length).toBe(1);
    expect(lost).toEqual([]);
  });
});
