// The registry: for every collective, its algorithms by name, collected from the algorithm files
// (each exports its run, description, cost and traffic formula as `algorithm`). The op layer runs
// them by name and the cost model picks among them (CMESH_ALGO / option `algorithm`).
import type { Collective } from '../ops/names';
import * as allGatherBruck from './allgather/bruck';
import * as allGatherRing from './allgather/ring';
import * as allGatherHierarchical from './allgather/hierarchical';
import * as allReduceDirect from './allreduce/direct';
import * as allReduceHalvingDoubling from './allreduce/halving-doubling';
import * as allReduceHierarchical from './allreduce/hierarchical';
import * as allReduceRecursiveDoubling from './allreduce/recursive-doubling';
import * as allReduceRing from './allreduce/ring';
import * as allReduceTree from './allreduce/tree';
import * as allToAllPairwise from './alltoall/pairwise';
import * as barrierDissemination from './barrier/dissemination';
import * as broadcastBinomial from './broadcast/binomial';
import * as broadcastChain from './broadcast/chain';
import * as gatherLinear from './gather/linear';
import * as reduceBinomial from './reduce/binomial';
import * as reduceScatterHalving from './reducescatter/halving';
import * as reduceScatterRing from './reducescatter/ring';
import * as scatterLinear from './scatter/linear';
import type { Algorithm } from './algorithm';

export type * from './algorithm';
export { Scratch } from './scratch';

/** Algorithms keyed by their own names, in the order given (the cost model breaks ties by it). */
function byName<F, N extends string>(...list: Algorithm<F, N>[]): { readonly [K in N]: Algorithm<F, K> } {
  return Object.freeze(Object.fromEntries(list.map((a) => [a.name, a]))) as { readonly [K in N]: Algorithm<F, K> };
}

export const ALGORITHMS = {
  allReduce: byName(
    allReduceDirect.algorithm,
    allReduceRing.algorithm,
    allReduceTree.algorithm,
    allReduceHalvingDoubling.algorithm,
    allReduceRecursiveDoubling.algorithm,
    allReduceHierarchical.algorithm,
  ),
  broadcast: byName(broadcastBinomial.algorithm, broadcastChain.algorithm),
  reduce: byName(reduceBinomial.algorithm),
  gather: byName(gatherLinear.algorithm),
  scatter: byName(scatterLinear.algorithm),
  allGather: byName(allGatherRing.algorithm, allGatherBruck.algorithm, allGatherHierarchical.algorithm),
  reduceScatter: byName(reduceScatterRing.algorithm, reduceScatterHalving.algorithm),
  barrier: byName(barrierDissemination.algorithm),
  allToAll: byName(allToAllPairwise.algorithm),
} as const satisfies Record<Collective, object>;

/** The names of `C`'s algorithms: what its `algorithm` option accepts. */
export type AlgorithmName<C extends Collective> = keyof (typeof ALGORITHMS)[C] & string;

/** One collective's algorithm, looked up by a name the caller has checked. */
export function algorithmOf(collective: Collective, name: string): Algorithm<unknown> {
  return (ALGORITHMS[collective] as Record<string, Algorithm<unknown>>)[name];
}

export function algorithmNames<C extends Collective>(collective: C): AlgorithmName<C>[] {
  return Object.keys(ALGORITHMS[collective]) as AlgorithmName<C>[];
}
