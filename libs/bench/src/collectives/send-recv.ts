// sendrecv (nccl-tests): a ring, each rank sends its buffer to the next and receives the
// previous rank's. No in-place form. busbw factor 1.
import { inputTable } from '../pattern';
import { BenchCollective, Group, onceFactor, wholeShape } from './descriptor';

export const sendRecv: BenchCollective = {
  op: 'sendRecv',
  reduces: false,
  rooted: false,
  inPlace: 'none',
  busBwFactor: onceFactor,
  shape: (bytes, es) => wholeShape(bytes, es),
  input: (c) => inputTable(c.redop, c.rank),
  expected: (c) => [{ offset: 0, count: c.count, table: inputTable(c.redop, (c.rank + c.nranks - 1) % c.nranks) }],
  run: ({ dist, group, timeout, send, recv, rank, nranks }) => {
    const ranks = groupRanks(group, nranks);
    const s = dist.isend(send, { dst: ranks[(rank + 1) % nranks], group, timeout } as never);
    const r = dist.irecv(recv, { src: ranks[(rank + nranks - 1) % nranks], group, timeout } as never);
    return Promise.all([s.wait(), r.wait()]);
  },
};

/** Global ranks of the group's members in group-rank order (p2p takes global ranks, like torch). */
function groupRanks(group: Group | undefined, nranks: number): number[] {
  const g = group as unknown as { ranks?: readonly number[] } | undefined;
  if (g?.ranks && g.ranks.length === nranks) return [...g.ranks];
  return Array.from({ length: nranks }, (_, i) => i);
}
