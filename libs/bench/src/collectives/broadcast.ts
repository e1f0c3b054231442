// broadcast: the root's buffer on every rank. Non-roots start with garbage, so a rank the data
// never reached cannot pass. busbw factor 1.
import { GARBAGE, inputTable } from '../pattern';
import { BenchCollective, onceFactor, wholeShape } from './descriptor';

export const broadcast: BenchCollective = {
  op: 'broadcast',
  reduces: false,
  rooted: true,
  inPlace: 'same',
  busBwFactor: onceFactor,
  shape: (bytes, es) => wholeShape(bytes, es),
  input: (c) => (c.rank === c.root ? inputTable(c.redop, c.rank) : [...GARBAGE]),
  expected: (c) => [{ offset: 0, count: c.count, table: inputTable(c.redop, c.root) }],
  run: ({ dist, group, timeout, mode, send, recv, rank, root }) => {
    if (mode === 'out-of-place' && rank === root) recv.set(send as never);
    return dist.broadcast(recv, { src: root, group, timeout });
  },
};
