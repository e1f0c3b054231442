// Hierarchical (two-level) all-reduce for groups that span hosts with several ranks on each: the
// ranks of a host combine their data over the fast local transport (shared memory), only the
// combined data crosses between hosts, and the result spreads again within each host. Across a
// cut between two hosts a flat ring moves 2·(P-1)/P·N each way (1.5·N at 2 hosts x 2 ranks); this
// moves 2·(H-1)/H·N (N at 2 hosts), the least any all-reduce can.
//
// Every host with the same number of ranks L (NCCL's and Horovod's scheme, every local rank a
// leader of 1/L of the data), segment by segment (a pipelining chunk each) so that the link between hosts never waits for
// the work within a host:
//   1. reduce-scatter of the segment within the host (ring): local rank i holds the host's sum of
//      block i of the segment
//   2. all-reduce of that block among the ranks with local index i, one per host: between two
//      hosts one exchange (recursive doubling's single round), streamed, every segment's receive
//      posted up front; between more, ring or halving-doubling, whichever the cost model prefers,
//      one segment after the other. The L of them run at once and share the host's link.
//   3. all-gather of the segment within the host (ring), as soon as its block is reduced
// Every rank of a host does 1 for every segment, then 3 for every segment, in segment order: the
// pairs within a host see their messages in the same order on both ends.
// Hosts with different rank counts (MPI's two-level scheme, one leader per host, its lowest rank):
//   1. binomial reduce to the leader within the host, 2. all-reduce among the leaders,
//   3. binomial broadcast from the leader within the host.
// AVG sums throughout and divides by the group's size once at the end, as the flat algorithms do.
import type { Comm } from '../../transport/comm';
import { getCostParams } from '../../cost-params';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { Tensor, bytesOf, dtypeOf } from '../../tensor/dtype';
import type { Algorithm, AllReduceFn, CostParams } from '../algorithm';
import { AlgorithmOptions, DEFAULT_CHUNK_BYTES, blockSize, blockStart, byteRange, ceilLog2, chunks, recvIfAny, sendIfAny } from '../common';
import { reduceBinomial } from '../reduce/binomial';
import { broadcastBinomial } from '../broadcast/binomial';
import { allGatherRing } from '../allgather/ring';
import { reduceScatterRing } from '../reducescatter/ring';
import type { Scratch } from '../scratch';
import { SubComm, hostLayout } from '../topology';
import { algorithm as ring, allReduceRing } from './ring';
import { algorithm as halvingDoubling, allReduceHalvingDoubling } from './halving-doubling';

/**
 * Segments between hosts: a pipelining chunk each (512 KiB by default), at most 8, so that the
 * first segment's work within a host, before the link is busy, and the last one's, after, stay
 * short, while ranks that share cores do not switch for every small piece.
 */
const MAX_SEGMENTS = 8;

function segmentsFor(bytes: number, hosts: number, chunkBytes = DEFAULT_CHUNK_BYTES): number {
  return hosts < 2 ? 1 : Math.min(MAX_SEGMENTS, Math.max(1, Math.ceil(bytes / Math.max(1, chunkBytes))));
}

/** The cheaper of ring and halving-doubling for `bytes` among H > 2 hosts (every rank of that sub-group computes the same). */
function betweenHosts(bytes: number, H: number, params: CostParams): typeof ring | typeof halvingDoubling {
  return halvingDoubling.cost(bytes, H, params) < ring.cost(bytes, H, params) ? halvingDoubling : ring;
}

/** Seconds for the all-reduce between hosts of N bytes in S segments, the link shared by L flows. */
function betweenHostsCost(N: number, H: number, L: number, S: number, params: CostParams): number {
  if (H < 2) return 0;
  const shared = { ...params, beta: params.beta * L };
  const seg = N / L / S;
  // two hosts: one streamed exchange, the last segment's reduction exposed
  if (H === 2) return S * params.alpha + (N / L) * shared.beta + seg * params.gamma;
  return S * betweenHosts(seg, H, shared).cost(seg, H, shared);
}

/** Marks a promise's failure as handled (the op reports the first failure; later ones must not crash the process). */
function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

async function uniformHosts(
  comm: Comm,
  data: Tensor,
  op: ReduceOp,
  scratch: Scratch,
  opts: AlgorithmOptions | undefined,
  members: number[][],
  host: number,
  local: number,
): Promise<void> {
  const n = data.length;
  const intra = new SubComm(comm, members[host]);
  const peers = new SubComm(
    comm,
    members.map((m) => m[local]),
  );
  const L = intra.size;
  const H = peers.size;
  const S = segmentsFor(data.byteLength, H, opts?.chunkBytes);
  const dtype = dtypeOf(data);
  const segStart = (s: number) => blockStart(n, S, s);
  const segLen = (s: number) => blockSize(n, S, s);
  // this rank's block of each segment: its offset in the shard area
  const mine = (s: number) => blockSize(segLen(s), L, local);
  const shardAt: number[] = [0];
  for (let s = 0; s < S; s++) shardAt.push(shardAt[s] + mine(s));
  // shards (and, between two hosts, what the other host sends) outlive the reduce-scatters' use of
  // `scratch`; between more hosts the all-reduces run beside the reduce-scatters, on a third area
  const [shards, incoming] = L > 1 || H === 2 ? scratch.child.tensors(dtype, L > 1 ? shardAt[S] : 0, H === 2 ? shardAt[S] : 0) : [];
  const shard = (s: number): Tensor =>
    L > 1 ? (shards.subarray(shardAt[s], shardAt[s + 1]) as Tensor) : (data.subarray(segStart(s), segStart(s) + segLen(s)) as Tensor);
  const other = 1 - peers.rank;
  const recvs = H === 2 ? Array.from({ length: S }, (_, s) => recvIfAny(peers, other, bytesOf(incoming.subarray(shardAt[s], shardAt[s + 1]) as Tensor))) : [];
  const sends: Promise<void>[] = [];
  const reduced: Promise<void>[] = [];
  let chain = Promise.resolve();
  for (let s = 0; s < S; s++) {
    if (L > 1) {
      const seg = data.subarray(segStart(s), segStart(s) + segLen(s)) as Tensor;
      const counts = Array.from({ length: L }, (_, i) => blockSize(segLen(s), L, i));
      await reduceScatterRing(intra, seg, shard(s), counts, op, scratch);
    }
    if (H === 2) {
      const sent = sendIfAny(peers, other, bytesOf(shard(s)));
      sends.push(sent);
      // the block is the send's until the send is done; a + b and b + a are the same in IEEE
      // arithmetic, so both hosts end with identical blocks
      reduced.push(handled(Promise.all([sent, recvs[s]]).then(() => reduceInto(shard(s), incoming.subarray(shardAt[s], shardAt[s + 1]) as Tensor, op))));
    } else if (H > 2) {
      const block = shard(s);
      chain = handled(chain.then(() => allReduceAmong(peers, block, op, scratch.child.child, L, opts)));
      reduced.push(chain);
    }
  }
  for (let s = 0; s < S; s++) {
    await reduced[s];
    if (L > 1) {
      const start = segStart(s);
      const len = segLen(s);
      const blocks = Array.from({ length: L }, (_, i) => byteRange(data, start + blockStart(len, L, i), start + blockStart(len, L, i + 1)));
      await allGatherRing(intra, bytesOf(shard(s)), blocks);
    }
  }
  await Promise.all([...sends, ...recvs, ...reduced]);
}

async function allReduceAmong(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, flows: number, opts?: AlgorithmOptions): Promise<void> {
  if (comm.size < 2) return;
  const p = getCostParams('tcp');
  const algo = betweenHosts(data.byteLength, comm.size, { ...p, beta: p.beta * flows });
  if (algo === halvingDoubling) await allReduceHalvingDoubling(comm, data, op, scratch);
  else await allReduceRing(comm, data, op, scratch, opts);
}

async function allReduceHierarchical(comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions): Promise<void> {
  const P = comm.size;
  const n = data.length;
  if (P > 1 && n > 0) {
    const sum: ReduceOp = op === 'avg' ? 'sum' : op;
    const { members, host, local, uniform } = hostLayout(comm);
    if (uniform) {
      await uniformHosts(comm, data, sum, scratch, opts, members, host, local);
    } else {
      const intra = new SubComm(comm, members[host]);
      await reduceBinomial(intra, data, sum, 0, scratch);
      if (local === 0)
        await allReduceAmong(
          new SubComm(
            comm,
            members.map((m) => m[0]),
          ),
          data,
          sum,
          scratch,
          1,
          opts,
        );
      await broadcastBinomial(intra, bytesOf(data), 0);
    }
  }
  if (op === 'avg' && n > 0) finishAvg(data, P);
}

export const algorithm: Algorithm<AllReduceFn, 'hierarchical'> = {
  name: 'hierarchical',
  run: allReduceHierarchical,
  description: 'two-level: reduce-scatter within each host (shared memory), all-reduce between hosts, all-gather within each host; pipelined in segments',
  cost: (N, P, params, topology) => {
    const H = topology && topology.hosts > 1 ? topology.hosts : 1;
    const intra = H > 1 ? topology!.intra : params;
    const L = H > 1 ? topology!.perHost : P;
    if (H === 1 || topology!.uniform) {
      const S = segmentsFor(N, H, intra.chunkBytes);
      const seg = N / S;
      // the reduce-scatter ring is pipelined per chunk like the all-reduce ring: reductions hide
      // behind the transfers except for one chunk per step
      const k = chunks(seg / L, intra.chunkBytes);
      const rs = (L - 1 + k - 1) * intra.alpha + ((L - 1) / L) * seg * intra.beta + (L - 1) * Math.min(seg / L, intra.chunkBytes) * intra.gamma;
      const ag = (L - 1) * (intra.alpha + (seg / L) * intra.beta);
      // on one host it is a ring whose all-gather waits for the reduce-scatter to drain
      if (H === 1) return rs + ag + params.alpha;
      // the first segment's reduce-scatter and the last one's all-gather are exposed; the rest
      // overlaps the link when the link is the slower
      return rs + Math.max(betweenHostsCost(N, H, L, S, params), (S - 1) * (rs + ag)) + ag;
    }
    const rounds = ceilLog2(L);
    return rounds * (intra.alpha + N * (intra.beta + intra.gamma)) + betweenHosts(N, H, params).cost(N, H, params) + rounds * (intra.alpha + N * intra.beta);
  },
};
