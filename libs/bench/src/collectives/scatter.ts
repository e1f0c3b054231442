// scatter: rank r receives block r of the root's buffer. torch has no in-place form. busbw
// factor (n-1)/n.
import type { Tensor } from '@cmesh/collectives';
import { inputTable } from '../pattern';
import { BenchCollective, splitShape, spreadFactor } from './descriptor';

export const scatter: BenchCollective = {
  op: 'scatter',
  reduces: false,
  rooted: true,
  inPlace: 'none',
  busBwFactor: spreadFactor,
  shape: (bytes, es, nranks) => splitShape(bytes, es, nranks, 'all', 'one'),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => [{ offset: 0, count: c.count, table: inputTable(c.redop, c.root, c.rank * c.count) }],
  run: ({ dist, group, timeout, send, recv, rank, root, nranks, count }) => {
    // torch's scatter takes one tensor per rank on the root, and none on the other ranks
    const scatterList = rank === root ? Array.from({ length: nranks }, (_, q) => send.subarray(q * count, (q + 1) * count) as Tensor) : undefined;
    return dist.scatter(recv, { scatterList, src: root, group, timeout });
  },
};
