// Hierarchical (two-level) all-gather for groups that span hosts with the same number of ranks L
// on each: first the ranks with the same local index, one per host, gather each other's blocks
// (ring; the L of these run at once and share each host's link), then within each host the ranks
// pass on what they collected (one ring per host's set of blocks, over shared memory). Only each
// rank's own block crosses to each other host once: (H-1)/H·N out of a host each way, against a
// flat ring's (P-1)/P·N across a cut between two hosts (0.75·N at 2 hosts x 2 ranks, 0.5·N here).
// Hosts with different rank counts run the flat ring.
import type { Comm } from '../../transport/comm';
import type { AllGatherFn, Algorithm } from '../algorithm';
import { SubComm, hostLayout } from '../topology';
import { algorithm as ring, allGatherRing } from './ring';

async function allGatherHierarchical(comm: Comm, input: Uint8Array, outputs: Uint8Array[]): Promise<void> {
  const { members, host, local, uniform } = hostLayout(comm);
  if (!uniform || members.length === 1 || members[0].length === 1) return allGatherRing(comm, input, outputs);
  // 1. between hosts: my block to the ranks with my local index
  const peers = members.map((m) => m[local]);
  await allGatherRing(
    new SubComm(comm, peers),
    input,
    peers.map((r) => outputs[r]),
  );
  // 2. within my host: every host's blocks, one ring each (in host order on every rank, so the
  // pairs of this host see their messages in the same order)
  const intra = new SubComm(comm, members[host]);
  for (const m of members)
    await allGatherRing(
      intra,
      outputs[m[local]],
      m.map((r) => outputs[r]),
    );
}

export const algorithm: Algorithm<AllGatherFn, 'hierarchical'> = {
  name: 'hierarchical',
  run: (comm, input, outputs) => allGatherHierarchical(comm, input, outputs),
  description: 'two-level: ring among the ranks with the same local index across hosts, then rings within each host (shared memory)',
  cost: (N, P, params, topology) => {
    // one host, one rank per host or uneven hosts: the flat ring it runs, and a message more
    if (!topology || topology.hosts < 2 || topology.perHost < 2 || !topology.uniform) return ring.cost(N, P, params) + params.alpha;
    const { hosts: H, perHost: L, intra } = topology;
    const block = N / P;
    // the L rings between hosts share each host's link
    return (H - 1) * (params.alpha + block * params.beta * L) + H * (L - 1) * (intra.alpha + block * intra.beta);
  },
};
