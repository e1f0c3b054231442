import { MAX_TIMER_MS, timerMs } from './timer';

describe('timerMs', () => {
  it('keeps delays a Node timer holds and cuts longer ones to 2^31-1 ms', () => {
    expect(timerMs(60_000)).toBe(60_000);
    expect(timerMs(MAX_TIMER_MS)).toBe(MAX_TIMER_MS);
    expect(timerMs(3e9)).toBe(MAX_TIMER_MS);
    expect(timerMs(Infinity)).toBe(MAX_TIMER_MS);
    expect(timerMs(-5)).toBe(0);
    expect(timerMs(NaN)).toBe(0);
  });

  it('a clamped timer does not fire at once (an unclamped 3e9 ms one would, after 1 ms)', async () => {
    let fired = false;
    const t = setTimeout(() => (fired = true), timerMs(3e9));
    await new Promise((r) => setTimeout(r, 50));
    clearTimeout(t);
    expect(fired).toBe(false);
  });
});
