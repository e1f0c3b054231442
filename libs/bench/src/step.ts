// One collective of a sweep, prepared on one rank: buffers filled once, then per iteration
// reset() (untimed), run() (timed) and check() (untimed).
//
// Variants follow nccl-tests. Ops that torch defines in place only (all_reduce, broadcast,
// reduce) have no separate output buffer, so their out-of-place variant is what a torch user
// writes for one: copy the send buffer into the receive buffer, then the in-place op; the copy
// is timed. all_gather / reduce_scatter in place use a view of the output / input as the other
// buffer, as nccl-tests does. all_to_all, gather, scatter and sendrecv have no in-place form in
// torch; their in-place column is N/A.
import type * as Collectives from '@cmesh/collectives';
import type { Tensor } from '@cmesh/collectives';
import { BENCH_DTYPES, BenchOp, BenchShape, BenchSweep, benchShape, hasRoot } from '@cmesh/protocol';
import { ExpectedSegment, allocBench, checkSegments, encodeTable, fillPeriodic, inputTable, reducedTable } from './pattern';

export type Dist = typeof Collectives;
export type Group = Parameters<Dist['getRank']>[0];
export type BenchMode = 'out-of-place' | 'in-place';

export interface BenchStep {
  shape: BenchShape;
  reset(): void;
  run(): Promise<unknown>;
  /** wrong elements on this rank, or null where this rank's output is unspecified */
  check(): number | null;
}

const GARBAGE = Array.from({ length: 15 }, () => 99);

const REDOPS = { sum: 'SUM', prod: 'PRODUCT', min: 'MIN', max: 'MAX', avg: 'AVG' } as const;

/** Whether the op has an in-place form (see the header comment). */
export function hasInPlace(op: BenchOp): boolean {
  return op === 'all_reduce' || op === 'broadcast' || op === 'reduce' || op === 'all_gather' || op === 'reduce_scatter';
}

export interface StepContext {
  dist: Dist;
  group?: Group;
  rank: number;
  nranks: number;
  sweep: BenchSweep;
}

export function prepareStep(ctx: StepContext, bytes: number, mode: BenchMode): BenchStep {
  const { dist, group, rank, nranks, sweep } = ctx;
  const op = sweep.op;
  const dtype = BENCH_DTYPES[sweep.dtype].name;
  const shape = benchShape(op, bytes, BENCH_DTYPES[sweep.dtype].bytes, nranks);
  const redop = sweep.redop;
  const root = hasRoot(op) ? sweep.root : -1;
  const reduceOp = dist.ReduceOp[REDOPS[redop]];
  const timeout = sweep.timeoutMs;
  const per = shape.count;
  const alloc = (n: number) => allocBench(dtype, n);
  const filled = (n: number, table: number[]) => {
    const t = alloc(n);
    fillPeriodic(t, encodeTable(dtype, table));
    return t;
  };
  // Phase p of the pattern starts at element p, so a table shifted by p describes a slice at p.
  const mine = (phase = 0) => inputTable(redop, rank, phase);
  const reduced = (phase = 0) => reducedTable(redop, nranks, phase);
  const check = (segments: ExpectedSegment[]) => (sweep.check ? checkSegments(dtype, segments, redop) : 0);
  const unchecked = () => null;

  switch (op) {
    case 'all_reduce':
    case 'reduce':
    case 'broadcast': {
      const isRoot = rank === root;
      const source = op === 'broadcast' && !isRoot ? filled(per, GARBAGE) : filled(per, mine());
      const buf = alloc(per);
      const expected = op === 'broadcast' ? inputTable(redop, root) : reduced();
      const collective = () =>
        op === 'all_reduce'
          ? dist.allReduce(buf, { op: reduceOp, group, timeout })
          : op === 'reduce'
            ? dist.reduce(buf, { dst: root, op: reduceOp, group, timeout })
            : dist.broadcast(buf, { src: root, group, timeout });
      const wantsOutput = op !== 'reduce' || isRoot;
      if (mode === 'in-place') {
        return {
          shape,
          reset: () => buf.set(source as never),
          run: collective,
          check: wantsOutput ? () => check([{ tensor: buf, table: expected }]) : unchecked,
        };
      }
      const garbage = filled(per, GARBAGE);
      const copies = op !== 'broadcast' || isRoot;
      return {
        shape,
        reset: () => buf.set(garbage as never),
        run: () => {
          if (copies) buf.set(source as never);
          return collective();
        },
        check: wantsOutput ? () => check([{ tensor: buf, table: expected }]) : unchecked,
      };
    }
    case 'all_gather': {
      const out = alloc(per * nranks);
      const garbage = filled(per * nranks, GARBAGE);
      const source = filled(per, mine());
      const input = mode === 'in-place' ? out.subarray(rank * per, (rank + 1) * per) : alloc(per);
      const segments = Array.from({ length: nranks }, (_, q) => ({ tensor: out.subarray(q * per, (q + 1) * per) as Tensor, table: inputTable(redop, q) }));
      return {
        shape,
        reset: () => {
          out.set(garbage as never);
          input.set(source as never);
        },
        run: () => dist.allGatherIntoTensor(out, input as Tensor, { group, timeout }),
        check: () => check(segments),
      };
    }
    case 'reduce_scatter': {
      const input = alloc(per * nranks);
      const source = filled(per * nranks, mine());
      const out = mode === 'in-place' ? input.subarray(rank * per, (rank + 1) * per) : alloc(per);
      const garbage = filled(per, GARBAGE);
      return {
        shape,
        reset: () => {
          input.set(source as never);
          if (mode === 'out-of-place') out.set(garbage as never);
        },
        run: () => dist.reduceScatterTensor(out as Tensor, input, { op: reduceOp, group, timeout }),
        check: () => check([{ tensor: out as Tensor, table: reduced(rank * per) }]),
      };
    }
    case 'all_to_all': {
      const input = filled(per * nranks, mine());
      const out = alloc(per * nranks);
      const garbage = filled(per * nranks, GARBAGE);
      // Chunk q of the output comes from rank q's chunk `rank`.
      const segments = Array.from({ length: nranks }, (_, q) => ({
        tensor: out.subarray(q * per, (q + 1) * per) as Tensor,
        table: inputTable(redop, q, rank * per),
      }));
      return {
        shape,
        reset: () => out.set(garbage as never),
        run: () => dist.allToAllSingle(out, input, { group, timeout }),
        check: () => check(segments),
      };
    }
    case 'gather': {
      const input = filled(per, mine());
      const isRoot = rank === root;
      const outs = isRoot ? Array.from({ length: nranks }, () => alloc(per)) : undefined;
      const garbage = filled(per, GARBAGE);
      return {
        shape,
        reset: () => outs?.forEach((o) => o.set(garbage as never)),
        run: () => dist.gather(input, { gatherList: outs, dst: root, group, timeout }),
        check: outs ? () => check(outs.map((o, q) => ({ tensor: o, table: inputTable(redop, q) }))) : unchecked,
      };
    }
    case 'scatter': {
      const isRoot = rank === root;
      const full = isRoot ? filled(per * nranks, mine()) : undefined;
      const ins = full ? Array.from({ length: nranks }, (_, q) => full.subarray(q * per, (q + 1) * per) as Tensor) : undefined;
      const out = alloc(per);
      const garbage = filled(per, GARBAGE);
      return {
        shape,
        reset: () => out.set(garbage as never),
        run: () => dist.scatter(out, { scatterList: ins, src: root, group, timeout }),
        check: () => check([{ tensor: out, table: inputTable(redop, root, rank * per) }]),
      };
    }
    case 'sendrecv': {
      // nccl-tests' sendrecv: a ring, each rank sends to the next and receives from the previous.
      const input = filled(per, mine());
      const out = alloc(per);
      const garbage = filled(per, GARBAGE);
      const ranks = groupRanks(group, nranks);
      const next = ranks[(rank + 1) % nranks];
      const prev = ranks[(rank + nranks - 1) % nranks];
      const prevRank = (rank + nranks - 1) % nranks;
      return {
        shape,
        reset: () => out.set(garbage as never),
        run: () => {
          const s = dist.isend(input, { dst: next, group, timeout } as never);
          const r = dist.irecv(out, { src: prev, group, timeout } as never);
          return Promise.all([s.wait(), r.wait()]);
        },
        check: () => check([{ tensor: out, table: inputTable(redop, prevRank) }]),
      };
    }
  }
}

/** Global ranks of the group's members in group-rank order (p2p takes global ranks, like torch). */
function groupRanks(group: Group | undefined, nranks: number): number[] {
  const g = group as unknown as { ranks?: readonly number[] } | undefined;
  if (g?.ranks && g.ranks.length === nranks) return [...g.ranks];
  return Array.from({ length: nranks }, (_, i) => i);
}
