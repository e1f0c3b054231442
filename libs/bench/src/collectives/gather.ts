// gather: every rank's block, in rank order, at the root; the others' outputs are unspecified.
// torch has no in-place form. busbw factor (n-1)/n.
import type { Tensor } from '@cmesh/collectives';
import { inputTable } from '../pattern';
import { BenchCollective, blocks, splitShape, spreadFactor } from './descriptor';

export const gather: BenchCollective = {
  op: 'gather',
  reduces: false,
  rooted: true,
  inPlace: 'none',
  busBwFactor: spreadFactor,
  shape: (bytes, es, nranks) => splitShape(bytes, es, nranks, 'one', 'all'),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => (c.rank === c.root ? blocks(c.nranks, c.count, (q) => inputTable(c.redop, q)) : null),
  run: ({ dist, group, timeout, send, recv, rank, root, nranks, count }) => {
    // torch's gather takes one tensor per rank, and none on the other ranks
    const gatherList = rank === root ? Array.from({ length: nranks }, (_, q) => recv.subarray(q * count, (q + 1) * count) as Tensor) : undefined;
    return dist.gather(send, { gatherList, dst: root, group, timeout });
  },
};
