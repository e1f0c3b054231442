import { performance } from 'perf_hooks';
import { DEFAULT_SPIN_US, Spinner, YIELDING_SPIN_US } from './spinner';

describe('Spinner.fromEnv', () => {
  it('spins by default only when the local ranks fit on the cores', () => {
    expect(Spinner.fromEnv({ LOCAL_WORLD_SIZE: '2' }, 2).budgetUs).toBe(DEFAULT_SPIN_US);
    expect(Spinner.fromEnv({ LOCAL_WORLD_SIZE: '4' }, 2).budgetUs).toBe(0);
    expect(Spinner.fromEnv({}, 2).budgetUs).toBe(0);
  });

  it('over shared memory, ranks that share cores poll too, yielding; CMESH_SPIN_US still wins', () => {
    expect(Spinner.forShm({ LOCAL_WORLD_SIZE: '4' }, 2)).toMatchObject({ budgetUs: YIELDING_SPIN_US, yields: true });
    expect(Spinner.forShm({ LOCAL_WORLD_SIZE: '2' }, 2)).toMatchObject({ budgetUs: DEFAULT_SPIN_US, yields: false });
    expect(Spinner.forShm({}, 2)).toMatchObject({ budgetUs: 0, yields: false });
    expect(Spinner.forShm({ LOCAL_WORLD_SIZE: '4', CMESH_SPIN_US: '0' }, 2)).toMatchObject({ budgetUs: 0, yields: false });
  });

  it('CMESH_SPIN_US wins; 0 turns spinning off', () => {
    expect(Spinner.fromEnv({ CMESH_SPIN_US: '500', LOCAL_WORLD_SIZE: '8' }, 2).budgetUs).toBe(500);
    expect(Spinner.fromEnv({ CMESH_SPIN_US: '0', LOCAL_WORLD_SIZE: '1' }, 2).budgetUs).toBe(0);
  });

  it('spins for about the budget after a small transfer and then stops by itself; large transfers do not spin', async () => {
    const active = (sp: Spinner) => (sp as unknown as { active: boolean }).active;
    const s = new Spinner(5); // 5 ms
    const t0 = performance.now();
    s.kick(8);
    expect(active(s)).toBe(true);
    // polled from timers: a loaded machine may run them late, but never before the budget is over
    while (active(s) && performance.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 1));
    expect(active(s)).toBe(false);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(5);
    const big = new Spinner(5);
    big.kick(1 << 20);
    expect(active(big)).toBe(false);
  });
});
