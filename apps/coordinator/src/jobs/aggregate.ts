// Every member's samples of one size -> one nccl-tests row: per iteration the slowest rank,
// the median over iterations (protocol's measurementFromSamples), wrong elements summed over ranks.
import { BenchMeasurement, BenchRow, JobSweep, SizeSamplesMsg, hasRoot, isReduction, measurementFromSamples } from '@cmesh/protocol';

export function rowFromSamples(sweep: JobSweep, perRank: readonly SizeSamplesMsg[]): BenchRow {
  const first = perRank[0];
  for (const s of perRank) {
    if (s.bytes !== first.bytes || s.variants.length !== first.variants.length) {
      throw new RangeError(`ranks disagree on size ${first.requestedBytes}: ${s.bytes} vs ${first.bytes} bytes`);
    }
  }
  const measure = (mode: 'out-of-place' | 'in-place'): BenchMeasurement | null => {
    const idx = first.variants.findIndex((v) => v.mode === mode);
    if (idx < 0) return null;
    const variants = perRank.map((s) => s.variants[idx]);
    const checked = variants.filter((v) => v.wrong !== null);
    const wrong = sweep.check && checked.length > 0 ? checked.reduce((a, v) => a + (v.wrong ?? 0), 0) : null;
    return measurementFromSamples(sweep.op, first.bytes, perRank.length, variants.map((v) => v.times), wrong);
  };
  return {
    backend: sweep.backend,
    op: sweep.op,
    nranks: perRank.length,
    bytes: first.bytes,
    count: first.count,
    type: sweep.dtype,
    redop: isReduction(sweep.op) ? sweep.redop : 'none',
    root: hasRoot(sweep.op) ? sweep.root : -1,
    outOfPlace: measure('out-of-place'),
    inPlace: measure('in-place'),
  };
}
