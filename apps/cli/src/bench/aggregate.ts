// Turns every rank's samples of one size into one nccl-tests row: per iteration the slowest
// rank, the median over iterations, wrong elements summed over ranks.
import { BenchMeasurement, BenchRow, BenchSweep, hasRoot, isReduction, measurementFromSamples } from '@cmesh/protocol';
import type { BenchMode, SizeSamples } from '@cmesh/bench';

export function rowFromRanks(backend: string, sweep: BenchSweep, perRank: readonly SizeSamples[]): BenchRow {
  const first = perRank[0];
  if (!first) throw new RangeError('no rank samples to aggregate');
  for (const s of perRank) {
    if (s.bytes !== first.bytes || s.variants.length !== first.variants.length) {
      throw new RangeError(`ranks disagree on size step ${first.requestedBytes}: ${s.bytes} vs ${first.bytes} bytes`);
    }
  }
  const nranks = perRank.length;
  const measure = (mode: BenchMode): BenchMeasurement | null => {
    const idx = first.variants.findIndex((v) => v.mode === mode);
    if (idx < 0) return null;
    const variants = perRank.map((s) => s.variants[idx]);
    const checked = variants.filter((v) => v.wrong !== null);
    const wrong = sweep.check && checked.length > 0 ? checked.reduce((a, v) => a + (v.wrong ?? 0), 0) : null;
    return measurementFromSamples(sweep.op, first.bytes, nranks, variants.map((v) => v.times), wrong);
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
