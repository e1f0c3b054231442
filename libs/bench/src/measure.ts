// From raw per-rank, per-iteration times to nccl-tests numbers: per iteration the slowest rank,
// the median over iterations, algbw and busbw; and every rank's samples of one size to one row.
// `cmesh bench`, the coordinator (mesh jobs), the agents' metrics and the peer comparison all
// count the same way through these.
import type { BenchMeasurement, BenchMode, BenchRow, BenchSweep } from '@cmesh/protocol';
import type { BenchOp } from '@cmesh/protocol';
import { busBwFactor, hasRoot, isReduction } from './collectives';

/** algbw and busbw in GB/s (1e9 bytes per second, like nccl-tests) for a time in microseconds. */
export function bandwidths(op: BenchOp, bytes: number, timeUs: number, nranks: number): { algBwGBs: number; busBwGBs: number } {
  const algBwGBs = timeUs > 0 ? bytes / (timeUs * 1e3) : 0;
  return { algBwGBs, busBwGBs: algBwGBs * busBwFactor(op, nranks) };
}

/** Median of a non-empty list (mean of the middle two for even lengths). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of an empty list');
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Turns per-rank, per-iteration times (seconds) into one measurement: for each iteration the
 * slowest rank's time, then the median over iterations.
 */
export function measurementFromSamples(
  op: BenchOp,
  bytes: number,
  nranks: number,
  perRankSeconds: readonly (readonly number[])[],
  wrong: number | null,
): BenchMeasurement {
  const iters = perRankSeconds[0]?.length ?? 0;
  if (iters === 0 || perRankSeconds.some((t) => t.length !== iters)) {
    throw new RangeError('every rank must report the same, non-zero number of iterations');
  }
  const slowest = Array.from({ length: iters }, (_, i) => Math.max(...perRankSeconds.map((t) => t[i])));
  const timeUs = median(slowest) * 1e6;
  return { timeUs, ...bandwidths(op, bytes, timeUs, nranks), wrong, iters };
}

/** What one rank reports of one size (SizeSamples, or its wire form). */
export interface RankSizeSamples {
  requestedBytes: number;
  bytes: number;
  count: number;
  variants: { mode: BenchMode; times: number[]; wrong: number | null }[];
}

/** Every rank's samples of one size -> one nccl-tests row; wrong elements summed over ranks. */
export function rowFromRanks(
  backend: string,
  sweep: Pick<BenchSweep, 'op' | 'dtype' | 'redop' | 'root' | 'check'>,
  perRank: readonly RankSizeSamples[],
): BenchRow {
  const first = perRank[0];
  if (!first) throw new RangeError('no rank samples to aggregate');
  for (const s of perRank) {
    if (s.bytes !== first.bytes || s.variants.length !== first.variants.length) {
      throw new RangeError(`ranks disagree on size ${first.requestedBytes}: ${s.bytes} vs ${first.bytes} bytes`);
    }
  }
  const nranks = perRank.length;
  const measure = (mode: BenchMode): BenchMeasurement | null => {
    const idx = first.variants.findIndex((v) => v.mode === mode);
    if (idx < 0) return null;
    const variants = perRank.map((s) => s.variants[idx]);
    const checked = variants.filter((v) => v.wrong !== null);
    const wrong = sweep.check && checked.length > 0 ? checked.reduce((a, v) => a + (v.wrong ?? 0), 0) : null;
    return measurementFromSamples(
      sweep.op,
      first.bytes,
      nranks,
      variants.map((v) => v.times),
      wrong,
    );
  };
  return {
    backend,
    op: sweep.op,
    nranks,
    bytes: first.bytes,
    count: first.count,
    type: sweep.dtype,
    redop: isReduction(sweep.op) ? sweep.redop : 'none',
    root: hasRoot(sweep.op) ? sweep.root : -1,
    outOfPlace: measure('out-of-place'),
    inPlace: measure('in-place'),
  };
}
