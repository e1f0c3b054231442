import { LastSweepSeries } from './last-sweep';

const l = (size: number, op = 'all_reduce') => ({ op, backend: 'tcp', dtype: 'float32', size_class: String(size) });

it('a new sweep of the same op/backend/dtype returns the sizes the previous sweep left', () => {
  const t = new LastSweepSeries();
  expect(t.record('j1', l(8))).toEqual([]);
  expect(t.record('j1', l(1024))).toEqual([]);
  expect(t.record('j2', l(8, 'broadcast'))).toEqual([]); // another op: untouched
  expect(t.record('j3', l(1024))).toEqual([l(8)]); // 1024 is overwritten anyway
  expect(t.record('j3', l(4096))).toEqual([]);
  expect(t.record('j4', l(64))).toEqual([l(1024), l(4096)]);
});
