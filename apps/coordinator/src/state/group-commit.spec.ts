// Group commit: requests arriving during a write go together in the next one; each answered alone.
import { GroupCommit, Outcome } from './group-commit';

it('requests that arrive while a write is in flight are stored by the next write, each answered with its own outcome', async () => {
  const writes: number[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const gc = new GroupCommit<number, number>(async (_key, items) => {
    writes.push(items);
    if (writes.length === 1) await gate;
    return items.map((i): Outcome<number> => (i < 0 ? { ok: false, error: new RangeError(`negative ${i}`) } : { ok: true, value: i * 10 }));
  });
  const first = gc.submit('k', 1);
  const rest = [2, -3, 4].map((i) => gc.submit('k', i));
  const other = gc.submit('other', 7); // another key does not wait for k
  expect(await other).toBe(70);
  release();
  expect(await first).toBe(10);
  const settled = await Promise.allSettled(rest);
  expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([20, 'negative -3', 40]);
  expect(writes).toEqual([[1], [7], [2, -3, 4]]);
});

it('a failed write fails every request it held, and the next request gets a fresh write', async () => {
  let fail = true;
  const gc = new GroupCommit<string, string>(async (_key, items) => {
    if (fail) throw new Error('store unavailable');
    return items.map((value) => ({ ok: true as const, value }));
  });
  await expect(Promise.all([gc.submit('k', 'a'), gc.submit('k', 'b')])).rejects.toThrow('store unavailable');
  fail = false;
  expect(await gc.submit('k', 'c')).toBe('c');
});
