// The sweep as one rank runs it: for every size and variant, warm-up iterations, then timed
// iterations, each preceded by a barrier (so every rank starts together) and followed by an
// untimed check. Returns raw per-iteration times; whoever collects the ranks' samples turns them
// into rows (measure.ts), so the in-process bench, the mesh agents and the peer driver share it.
import type { BenchMode, BenchOp, BenchSweep } from '@cmesh/protocol';
import { performance } from 'perf_hooks';
import { Dist, Group, hasInPlace } from './collectives';
import { BenchStep, prepareStep } from './step';

export interface StepSamples {
  mode: BenchMode;
  /** seconds per timed iteration */
  times: number[];
  /** worst iteration's wrong elements on this rank; null where unchecked or unspecified */
  wrong: number | null;
}

export interface SizeSamples {
  requestedBytes: number;
  bytes: number;
  count: number;
  variants: StepSamples[];
}

export interface RankSweepOptions {
  dist: Dist;
  group?: Group;
  sweep: BenchSweep;
  /** called after every size, e.g. to stream samples to a collector */
  onSize?: (s: SizeSamples) => void;
}

export function modesFor(op: BenchOp, sweep: BenchSweep): BenchMode[] {
  return sweep.modes.filter((m) => m === 'out-of-place' || hasInPlace(op));
}

export async function timeStep(dist: Dist, group: Group | undefined, step: BenchStep, sweep: BenchSweep, mode: BenchMode): Promise<StepSamples> {
  const times: number[] = [];
  let wrong: number | null = sweep.check ? 0 : null;
  for (let i = 0; i < sweep.warmup + sweep.iters; i++) {
    step.reset();
    await dist.barrier({ group, timeout: sweep.timeoutMs });
    const t0 = performance.now();
    await step.run();
    const t1 = performance.now();
    if (i < sweep.warmup) continue;
    times.push((t1 - t0) / 1e3);
    if (sweep.check) {
      const w = step.check();
      wrong = w === null ? null : Math.max(wrong ?? 0, w);
    }
  }
  return { mode, times, wrong };
}

/** Runs one size on this rank, every requested variant. Sizes whose per-rank count is 0 are skipped. */
export async function runSize(opts: RankSweepOptions, requestedBytes: number): Promise<SizeSamples | null> {
  const { dist, group, sweep } = opts;
  const rank = dist.getRank(group);
  const nranks = dist.getWorldSize(group);
  const variants: StepSamples[] = [];
  let shape = null;
  for (const mode of modesFor(sweep.op, sweep)) {
    const step = prepareStep({ dist, group, rank, nranks, sweep }, requestedBytes, mode);
    shape = step.shape;
    if (shape.count === 0) return null;
    variants.push(await timeStep(dist, group, step, sweep, mode));
  }
  if (!shape) return null;
  return { requestedBytes, bytes: shape.bytes, count: shape.count, variants };
}

export async function runRankSweep(opts: RankSweepOptions): Promise<SizeSamples[]> {
  const out: SizeSamples[] = [];
  for (const bytes of opts.sweep.sizes) {
    const s = await runSize(opts, bytes);
    if (!s) continue;
    out.push(s);
    opts.onSize?.(s);
  }
  return out;
}
