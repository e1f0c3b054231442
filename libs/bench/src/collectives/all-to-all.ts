// all_to_all: block q of rank r's output is block r of rank q's input. torch has no in-place
// form. busbw factor (n-1)/n.
import { inputTable } from '../pattern';
import { BenchCollective, blocks, splitShape, spreadFactor } from './descriptor';

export const allToAll: BenchCollective = {
  op: 'allToAll',
  reduces: false,
  rooted: false,
  inPlace: 'none',
  busBwFactor: spreadFactor,
  shape: (bytes, es, nranks) => splitShape(bytes, es, nranks, 'all', 'all'),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => blocks(c.nranks, c.count, (q) => inputTable(c.redop, q, c.rank * c.count)),
  run: ({ dist, group, timeout, send, recv }) => dist.allToAllSingle(recv, send, { group, timeout }),
};
