// Which agents of a node-spread pool a job of n ranks takes: as few nodes as possible, each
// node's ranks contiguous (torchrun's layout: GROUP_RANK g holds ranks g*k .. g*k+k-1), and the
// nodes left as whole as possible for the next job. Pure.
//
// The fewest nodes that can hold n ranks are the ones with the most free agents, so nodes are
// taken whole, largest first, while the rest does not fit in one; the rest then goes to the
// smallest node that holds it (best fit: a large node stays free for a large job). Ties go to
// the node whose first agent comes first in the pool's order (by name), so a pool where every
// agent is a node of its own is taken in that order, as a pick without nodes would.

/** The node key of an agent: its node, or a key of its own (an agent that did not say). */
export function nodeKey(v: { agentId: string; node?: string }): string {
  // '\0' is in no node name (NodeNameSchema): the key cannot meet a real node's
  return v.node ?? `\0${v.agentId}`;
}

/**
 * n agents of `pool` (in the pool's order within a node), grouped by node, nodes in the pool's
 * order of their first agent; null when the pool has fewer than n.
 */
export function packByNode<T extends { agentId: string; node?: string }>(pool: readonly T[], n: number): T[] | null {
  if (n > pool.length) return null;
  const nodes = new Map<string, T[]>();
  for (const v of pool) {
    const k = nodeKey(v);
    const list = nodes.get(k);
    if (list) list.push(v);
    else nodes.set(k, [v]);
  }
  // in the pool's order; a stable sort keeps that order among nodes of one size
  const left = [...nodes.values()];
  const order = new Map(left.map((list, i) => [list, i]));
  const taken: { list: T[]; count: number }[] = [];
  let need = n;
  while (need > 0) {
    const fit = left.filter((l) => l.length >= need);
    if (fit.length) {
      const best = fit.reduce((b, l) => (l.length < b.length ? l : b));
      taken.push({ list: best, count: need });
      break;
    }
    const largest = left.reduce((b, l) => (l.length > b.length ? l : b));
    taken.push({ list: largest, count: largest.length });
    left.splice(left.indexOf(largest), 1);
    need -= largest.length;
  }
  taken.sort((x, y) => order.get(x.list)! - order.get(y.list)!);
  return taken.flatMap((t) => t.list.slice(0, t.count));
}
