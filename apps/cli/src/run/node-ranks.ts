// Node ranks of a closed rendezvous round: a node that asked for one (--node-rank) gets it, the
// others fill the free ranks in join order. Every node computes the same answer from the same input.
import { InvalidArgumentError } from '@cmesh/collectives';

/** `wanted[i]` is the rank requested by the i-th node to join (null: any); returns the rank of each. */
export function assignNodeRanks(wanted: (number | null)[]): number[] {
  const n = wanted.length;
  const taken = new Map<number, number>();
  wanted.forEach((w, i) => {
    if (w === null) return;
    if (!Number.isInteger(w) || w < 0 || w >= n) throw new InvalidArgumentError(`--node-rank ${w} is out of range [0, ${n}) for a round of ${n} nodes`);
    if (taken.has(w)) throw new InvalidArgumentError(`--node-rank ${w} was requested by two nodes (join order ${taken.get(w)} and ${i})`);
    taken.set(w, i);
  });
  let next = 0;
  return wanted.map((w) => {
    if (w !== null) return w;
    while (taken.has(next)) next++;
    taken.set(next, -1);
    return next;
  });
}
