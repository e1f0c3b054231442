// Ranks grouped by host, and Comms over a subset of a group's ranks, for the algorithms that run
// one phase among the ranks of each host and another between hosts. A sub-Comm forwards to the
// op's own Comm (same op tag, same byte counters, same timeout bookkeeping): phases that use the
// same pair of ranks run one after the other on both ranks, so their messages cannot cross.
import type { Comm } from '../transport/comm';

export interface HostLayout {
  /** group ranks of each host, ascending; hosts in order of their lowest rank */
  members: number[][];
  /** this rank's host */
  host: number;
  /** this rank's index among its host's ranks */
  local: number;
  /** every host has the same number of ranks */
  uniform: boolean;
}

/** The layout of comm's group (one host when the Comm does not say). */
export function hostLayout(comm: Comm): HostLayout {
  const hosts = comm.hosts ?? new Array<number>(comm.size).fill(0);
  const members: number[][] = [];
  const index = new Map<number, number>();
  for (let r = 0; r < comm.size; r++) {
    let h = index.get(hosts[r]);
    if (h === undefined) {
      h = members.length;
      index.set(hosts[r], h);
      members.push([]);
    }
    members[h].push(r);
  }
  const host = index.get(hosts[comm.rank])!;
  return { members, host, local: members[host].indexOf(comm.rank), uniform: members.every((m) => m.length === members[0].length) };
}

/** The Comm of `members` (group ranks of comm, in the sub-group's rank order); comm.rank must be one. */
export class SubComm implements Comm {
  readonly rank: number;
  readonly size: number;

  constructor(
    private readonly parent: Comm,
    private readonly members: readonly number[],
  ) {
    this.rank = members.indexOf(parent.rank);
    this.size = members.length;
  }

  send(peer: number, data: Uint8Array): Promise<void> {
    return this.parent.send(this.members[peer], data);
  }

  recv(peer: number, into: Uint8Array): Promise<void> {
    return this.parent.recv(this.members[peer], into);
  }
}
