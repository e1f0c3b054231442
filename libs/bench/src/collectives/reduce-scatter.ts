// reduce_scatter: rank r ends with the reduction of every rank's block r. In place, the output
// is this rank's block of the input (as nccl-tests does). busbw factor (n-1)/n.
import { inputTable, reducedTable } from '../pattern';
import { BenchCollective, splitShape, spreadFactor } from './descriptor';

export const reduceScatter: BenchCollective = {
  op: 'reduceScatter',
  reduces: true,
  rooted: false,
  inPlace: 'recv-in-send',
  busBwFactor: spreadFactor,
  shape: (bytes, es, nranks) => splitShape(bytes, es, nranks, 'all', 'one'),
  input: (c) => inputTable(c.redop, c.rank),
  // phase p of the pattern starts at element p: block r of the inputs starts at r·count
  expected: (c) => [{ offset: 0, count: c.count, table: reducedTable(c.redop, c.nranks, c.rank * c.count) }],
  run: ({ dist, group, timeout, send, recv, op }) => dist.reduceScatterTensor(recv, send, { op, group, timeout }),
};
