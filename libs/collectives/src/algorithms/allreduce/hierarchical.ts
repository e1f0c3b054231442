// Hierarchical (two-level) all-reduce for groups that span hosts with several ranks on each: the
// ranks of a host combine their data over the fast local transport (shared memory), only the
// combined data crosses between hosts, and the result spreads again within each host. Across a
// cut between two hosts a flat ring moves 2·(P-1)/P·N each way (1.5·N at 2 hosts x 2 ranks); this
// moves 2·(H-1)/H·N (N at 2 hosts), the least any all-reduce can.
//
// Every host with the same number of ranks L (NCCL's and Horovod's scheme, every local rank a
// leader of 1/L of the data):
//   1. reduce-scatter within the host (ring): local rank i holds the host's sum of block i
//   2. all-reduce of block i among the ranks with local index i, one per host (ring or
//      halving-doubling, whichever the cost model says is cheaper between hosts); the L of them
//      run at once and share the host's link
//   3. all-gather within the host (ring)
// Hosts with different rank counts (MPI's two-level scheme, one leader per host, its lowest rank):
//   1. binomial reduce to the leader within the host, 2. all-reduce among the leaders,
//   3. binomial broadcast from the leader within the host.
// AVG sums throughout and divides by the group's size once at the end, as the flat algorithms do.
import type { Comm } from '../../transport/comm';
import { getCostParams } from '../../cost-params';
import { finishAvg } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, AllReduceFn, CostParams } from '../algorithm';
import { AlgorithmOptions, blockSize, blockStart, byteRange, ceilLog2, chunks } from '../common';
import { reduceBinomial } from '../reduce/binomial';
import { broadcastBinomial } from '../broadcast/binomial';
import { allGatherRing } from '../allgather/ring';
import { reduceScatterRing } from '../reducescatter/ring';
import type { Scratch } from '../scratch';
import { SubComm, hostLayout } from '../topology';
import { algorithm as ring, allReduceRing } from './ring';
import { algorithm as halvingDoubling, allReduceHalvingDoubling } from './halving-doubling';

/** The cheaper of ring and halving-doubling for `bytes` among H hosts (every rank of that sub-group computes the same). */
function betweenHosts(bytes: number, H: number, params: CostParams): typeof ring | typeof halvingDoubling {
  return halvingDoubling.cost(bytes, H, params) < ring.cost(bytes, H, params) ? halvingDoubling : ring;
}

function betweenHostsCost(bytes: number, H: number, params: CostParams): number {
  return H < 2 ? 0 : betweenHosts(bytes, H, params).cost(bytes, H, params);
}

/** TCP's parameters with the host's link shared by `flows` transfers at once. */
function sharedLink(flows: number): CostParams {
  const p = getCostParams('tcp');
  return { ...p, beta: p.beta * flows };
}

async function allReduceAmong(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, flows: number, opts?: AlgorithmOptions): Promise<void> {
  if (comm.size < 2) return;
  const algo = betweenHosts(data.byteLength, comm.size, sharedLink(flows));
  if (algo === halvingDoubling) await allReduceHalvingDoubling(comm, data, op, scratch);
  else await allReduceRing(comm, data, op, scratch, opts);
}

export async function allReduceHierarchical(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions): Promise<void> {
  const P = comm.size;
  const n = data.length;
  if (P > 1 && n > 0) {
    const sum: ReduceOp = op === 'avg' ? 'sum' : op;
    const layout = hostLayout(comm);
    const intra = new SubComm(comm, layout.members[layout.host]);
    const L = intra.size;
    if (layout.uniform) {
      const local = layout.local;
      const counts = Array.from({ length: L }, (_, i) => blockSize(n, L, i));
      const peers = new SubComm(comm, layout.members.map((m) => m[local]));
      // the shard outlives the reduce-scatter's and the all-reduce's use of `scratch`
      const shard = L === 1 ? data : scratch.child.tensors(dtypeOf(data), counts[local])[0];
      if (L > 1) await reduceScatterRing(intra, data, shard, counts, sum, scratch);
      await allReduceAmong(peers, shard, sum, scratch, L, opts);
      if (L > 1) {
        const blocks = counts.map((_, i) => byteRange(data, blockStart(n, L, i), blockStart(n, L, i + 1)));
        await allGatherRing(intra, bytesOf(shard), blocks);
      }
    } else {
      await reduceBinomial(intra, data, sum, 0, scratch);
      if (layout.local === 0) await allReduceAmong(new SubComm(comm, layout.members.map((m) => m[0])), data, sum, scratch, 1, opts);
      await broadcastBinomial(intra, bytesOf(data), 0);
    }
  }
  if (op === 'avg' && n > 0) finishAvg(data, P);
}

export const algorithm: Algorithm<AllReduceFn, 'hierarchical'> = {
  name: 'hierarchical',
  run: allReduceHierarchical,
  description: 'two-level: reduce-scatter within each host (shared memory), all-reduce between hosts, all-gather within each host',
  cost: (N, P, params, topology) => {
    const H = topology && topology.hosts > 1 ? topology.hosts : 1;
    const intra = H > 1 ? topology!.intra : params;
    const L = H > 1 ? topology!.perHost : P;
    if (H === 1 || topology!.uniform) {
      // the reduce-scatter ring is pipelined per chunk like the all-reduce ring: reductions hide
      // behind the transfers except for one chunk per step
      const k = chunks(N / L, intra.chunkBytes);
      const rs = (L - 1 + k - 1) * intra.alpha + ((L - 1) / L) * N * intra.beta + (L - 1) * Math.min(N / L, intra.chunkBytes) * intra.gamma;
      const ag = (L - 1) * (intra.alpha + (N / L) * intra.beta);
      // on one host it is a ring whose all-gather waits for the reduce-scatter to drain
      if (H === 1) return rs + ag + params.alpha;
      return rs + betweenHostsCost(N / L, H, { ...params, beta: params.beta * L }) + ag;
    }
    const rounds = ceilLog2(L);
    return rounds * (intra.alpha + N * (intra.beta + intra.gamma)) + betweenHostsCost(N, H, params) + rounds * (intra.alpha + N * intra.beta);
  },
};
