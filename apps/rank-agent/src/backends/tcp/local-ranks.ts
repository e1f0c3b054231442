import type { JobMember } from '@cmesh/protocol';

/**
 * torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE for a job: the members on this member's host (the data
 * plane busy-polls only when they fit on the host's cores). Undefined when hosts are unknown.
 */
export function localRanks(members: readonly JobMember[], rank: number): { localRank: number; localWorldSize: number } | undefined {
  const host = members.find((x) => x.rank === rank)?.host;
  if (!host) return undefined;
  const local = members.filter((x) => x.host === host).sort((a, b) => a.rank - b.rank);
  return { localRank: local.findIndex((x) => x.rank === rank), localWorldSize: local.length };
}
