// Every rank's sweep rows as the table's rows: one line per collective, dtype, reduce op and size,
// out of place and in place side by side (nccl-tests' layout); the time is the slowest rank's
// (the sidecar's max over ranks) and wrong elements are summed over the ranks, as nccl-tests does.
import type { BenchMeasurement, BenchRow } from '@cmesh/protocol';
import type { NcclSweepRow } from './nccl-sweep';

function measurement(rows: NcclSweepRow[], iters: number): BenchMeasurement {
  const wrongs = rows.map((r) => r.wrong).filter((w): w is number => w !== null);
  const slowest = rows.reduce((a, r) => (r.timeSeconds > a.timeSeconds ? r : a), rows[0]);
  return {
    timeUs: slowest.timeSeconds * 1e6,
    algBwGBs: slowest.algbwBytesPerSecond / 1e9,
    busBwGBs: slowest.busbwBytesPerSecond / 1e9,
    wrong: wrongs.length ? wrongs.reduce((a, w) => a + w, 0) : null,
    iters,
  };
}

/** `perRank[r]` is rank r's rows (every rank runs the same steps in the same order). */
export function ncclBenchRows(perRank: readonly NcclSweepRow[][], iters: number, backend = 'nccl'): BenchRow[] {
  const nranks = perRank.length;
  const lines = new Map<string, { first: NcclSweepRow; modes: Map<string, NcclSweepRow[]> }>();
  for (const rows of perRank) {
    for (const r of rows) {
      const key = `${r.collective}/${r.dtype}/${r.redOp}/${r.root}/${r.sizeBytes}`;
      let line = lines.get(key);
      if (!line) lines.set(key, (line = { first: r, modes: new Map() }));
      const m = line.modes.get(r.mode) ?? [];
      m.push(r);
      line.modes.set(r.mode, m);
    }
  }
  return [...lines.values()].map(({ first: r, modes }) => {
    const oop = modes.get('out-of-place');
    const ip = modes.get('in-place');
    return {
      backend,
      op: r.collective,
      nranks,
      bytes: r.sizeBytes,
      count: r.count,
      type: r.dtype,
      redop: r.redOp ?? 'none',
      root: r.root ?? -1,
      outOfPlace: oop ? measurement(oop, iters) : null,
      inPlace: ip ? measurement(ip, iters) : null,
    };
  });
}
