// all_reduce: every rank ends with the reduction of every rank's buffer. busbw factor 2(n-1)/n:
// a ring moves each byte out and back once per rank but its own share.
import { inputTable, reducedTable } from '../pattern';
import { BenchCollective, checkRanks, wholeShape } from './descriptor';

export const allReduce: BenchCollective = {
  op: 'allReduce',
  reduces: true,
  rooted: false,
  inPlace: 'same',
  busBwFactor: (nranks) => {
    checkRanks(nranks);
    return (2 * (nranks - 1)) / nranks;
  },
  shape: (bytes, es) => wholeShape(bytes, es),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => [{ offset: 0, count: c.count, table: reducedTable(c.redop, c.nranks) }],
  run: ({ dist, group, timeout, mode, send, recv, op }) => {
    if (mode === 'out-of-place') recv.set(send as never);
    return dist.allReduce(recv, { op, group, timeout });
  },
};
