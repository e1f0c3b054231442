import type { JobMember } from '@cmesh/protocol';

export interface LocalRanks {
  localRank: number;
  localWorldSize: number;
  /** torchrun's GROUP_RANK / GROUP_WORLD_SIZE: known when the coordinator numbered the job's nodes */
  groupRank?: number;
  groupWorldSize?: number;
}

/**
 * torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE (and GROUP_RANK / GROUP_WORLD_SIZE) for a job: as the
 * coordinator numbered the members by node (CMESH_NODE_NAME); from a coordinator that does not,
 * the members on this member's host address (the data plane busy-polls only when they fit on the
 * host's cores). Undefined when neither is known.
 */
export function localRanks(members: readonly JobMember[], rank: number): LocalRanks | undefined {
  const me = members.find((x) => x.rank === rank);
  if (me?.localRank !== undefined && me.localWorldSize !== undefined) {
    const { localRank, localWorldSize, groupRank, groupWorldSize } = me;
    return { localRank, localWorldSize, ...(groupRank !== undefined && groupWorldSize !== undefined ? { groupRank, groupWorldSize } : {}) };
  }
  const host = me?.host;
  if (!host) return undefined;
  const local = members.filter((x) => x.host === host).sort((a, b) => a.rank - b.rank);
  return { localRank: local.findIndex((x) => x.rank === rank), localWorldSize: local.length };
}
