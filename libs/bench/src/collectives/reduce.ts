// reduce: the reduction of every rank's buffer at the root; the other ranks' buffers are
// unspecified (torch) and unchecked. busbw factor 1.
import { inputTable, reducedTable } from '../pattern';
import { BenchCollective, onceFactor, wholeShape } from './descriptor';

export const reduce: BenchCollective = {
  op: 'reduce',
  reduces: true,
  rooted: true,
  inPlace: 'same',
  busBwFactor: onceFactor,
  shape: (bytes, es) => wholeShape(bytes, es),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => (c.rank === c.root ? [{ offset: 0, count: c.count, table: reducedTable(c.redop, c.nranks) }] : null),
  run: ({ dist, group, timeout, mode, send, recv, op, root }) => {
    if (mode === 'out-of-place') recv.set(send as never);
    return dist.reduce(recv, { dst: root, op, group, timeout });
  },
};
