// all_gather: every rank's block, in rank order, on every rank. In place, the input is this
// rank's block of the output (as nccl-tests does). busbw factor (n-1)/n.
import type { Tensor } from '@cmesh/collectives';
import { inputTable } from '../pattern';
import { BenchCollective, blocks, splitShape, spreadFactor } from './descriptor';

export const allGather: BenchCollective = {
  op: 'allGather',
  reduces: false,
  rooted: false,
  inPlace: 'send-in-recv',
  busBwFactor: spreadFactor,
  shape: (bytes, es, nranks) => splitShape(bytes, es, nranks, 'one', 'all'),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => blocks(c.nranks, c.count, (q) => inputTable(c.redop, q)),
  run: ({ dist, group, timeout, send, recv }) => dist.allGatherIntoTensor(recv, send as Tensor, { group, timeout }),
};
