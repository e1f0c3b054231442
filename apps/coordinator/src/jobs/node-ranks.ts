// torchrun's per-node numbering of a job's ranks: LOCAL_RANK (position among the job's ranks on
// its node), LOCAL_WORLD_SIZE (the job's ranks on that node), GROUP_RANK (the node's position,
// nodes numbered in the order of their first rank) and GROUP_WORLD_SIZE (the job's nodes). Pure.
// An nranks pick lays ranks out node by node (node-packing.ts), so there GROUP_RANK g holds a
// contiguous block of ranks; a member list the request names keeps its order, and the numbers
// follow it all the same.
import { nodeKey } from './node-packing';

export interface NodeRanks {
  localRank: number;
  localWorldSize: number;
  groupRank: number;
  groupWorldSize: number;
}

/** The numbers of each member, in rank order (members[i] is rank i). */
export function nodeRanks(members: readonly { agentId: string; node?: string }[]): NodeRanks[] {
  const groups = new Map<string, number[]>();
  const keys = members.map(nodeKey);
  keys.forEach((k, rank) => {
    const list = groups.get(k);
    if (list) list.push(rank);
    else groups.set(k, [rank]);
  });
  const groupOf = new Map([...groups.keys()].map((k, i) => [k, i]));
  return keys.map((k, rank) => {
    const list = groups.get(k)!;
    return { localRank: list.indexOf(rank), localWorldSize: list.length, groupRank: groupOf.get(k)!, groupWorldSize: groups.size };
  });
}
