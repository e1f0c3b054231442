// nccl-tests' text output: a `#` preamble, a two-level header, one line per size with the
// out-of-place and in-place columns, and the footer. Pure functions so the in-process bench,
// the mesh bench and the GPU check all print the same table, in nccl-tests' spellings
// (all_reduce, float, prod).
import type { BenchMeasurement, BenchRow, BenchSweep } from '@cmesh/protocol';
import { ncclTestsOp, ncclTestsRedop, ncclTestsType } from './nccl-tests-names';

export interface BenchRankInfo {
  rank: number;
  pid: number;
  host: string;
  /** what a GPU line would name: here the backend and its data-plane address */
  device: string;
}

export interface BenchPreamble {
  backend: string;
  nranks: number;
  sweep: Pick<BenchSweep, 'op' | 'dtype' | 'redop' | 'root' | 'warmup' | 'iters' | 'check'>;
  minBytes: number;
  maxBytes: number;
  /** "2(factor)" or "1024(bytes)" as nccl-tests prints the step */
  step: string;
  ranks: BenchRankInfo[];
  /** every type and reduction the table holds (-d all, -o all), when more than the sweep's own */
  dtypes?: readonly BenchSweep['dtype'][];
  redops?: readonly BenchSweep['redop'][];
}

const pad = (v: string | number, w: number) => String(v).padStart(w);

/** nccl-tests' time column: fewer decimals as the number grows, always 7 wide. */
export function formatTimeUs(us: number): string {
  if (us >= 10000) return us.toFixed(0);
  if (us >= 100) return us.toFixed(1);
  return us.toFixed(2);
}

export function formatPreamble(p: BenchPreamble): string[] {
  const s = p.sweep;
  const lines = [
    `# Collective test starting: ${ncclTestsOp(s.op)}_perf (cmesh bench, backend ${p.backend})`,
    `# nThread 1 nGpus 0 nRanks ${p.nranks} minBytes ${p.minBytes} maxBytes ${p.maxBytes} step: ${p.step} ` +
      `warmup iters: ${s.warmup} iters: ${s.iters} agg iters: 1 validation: ${s.check ? 1 : 0} graph: 0`,
    `# op: ${ncclTestsOp(s.op)} type: ${(p.dtypes ?? [s.dtype]).map(ncclTestsType).join(',')} redop: ${(p.redops ?? [s.redop]).map(ncclTestsRedop).join(',')} root: ${s.root} timing: median over iterations of the ` +
      `slowest rank, barrier before each iteration`,
    '#',
    '# Using devices',
  ];
  for (const r of p.ranks) {
    lines.push(`#  Rank ${pad(r.rank, 2)} Group  0 Pid ${pad(r.pid, 6)} on ${pad(r.host, 10)} device ${r.device}`);
  }
  return lines;
}

export function formatHeader(): string[] {
  const fixed = (a: string, b: string, c: string, d: string, e: string) => `#${pad(a, 11)}  ${pad(b, 12)}  ${pad(c, 8)}  ${pad(d, 6)}  ${pad(e, 6)}`;
  const variant = (a: string, b: string, c: string, d: string) => `  ${pad(a, 7)}  ${pad(b, 6)}  ${pad(c, 6)}  ${pad(d, 6)}`;
  const title = ' '.repeat(fixed('', '', '', '', '').length);
  const span = variant('', '', '', '').length;
  const centre = (t: string) => t.padStart((span + t.length) >> 1).padEnd(span);
  return [
    '#',
    `${title}${centre('out-of-place')}${centre('in-place')}`.replace(/^ /, '#').trimEnd(),
    fixed('size', 'count', 'type', 'redop', 'root') + variant('time', 'algbw', 'busbw', '#wrong') + variant('time', 'algbw', 'busbw', '#wrong'),
    (fixed('(B)', '(elements)', '', '', '') + variant('(us)', '(GB/s)', '(GB/s)', '') + variant('(us)', '(GB/s)', '(GB/s)', '')).trimEnd(),
  ];
}

function formatVariant(m: BenchMeasurement | null): string {
  if (!m) return `  ${pad('N/A', 7)}  ${pad('N/A', 6)}  ${pad('N/A', 6)}  ${pad('N/A', 6)}`;
  return (
    `  ${pad(formatTimeUs(m.timeUs), 7)}  ${pad(m.algBwGBs.toFixed(2), 6)}  ${pad(m.busBwGBs.toFixed(2), 6)}` +
    `  ${pad(m.wrong === null ? 'N/A' : m.wrong, 6)}`
  );
}

export function formatRow(r: BenchRow): string {
  return (
    ` ${pad(r.bytes, 11)}  ${pad(r.count, 12)}  ${pad(ncclTestsType(r.type), 8)}  ${pad(ncclTestsRedop(r.redop), 6)}  ${pad(r.root, 6)}` +
    formatVariant(r.outOfPlace) +
    formatVariant(r.inPlace)
  );
}

/** Summary over all rows: wrong elements and the mean busbw over every measured variant. */
export function benchSummary(rows: readonly BenchRow[]): { wrong: number; avgBusBwGBs: number } {
  let wrong = 0;
  let sum = 0;
  let n = 0;
  for (const r of rows) {
    for (const m of [r.outOfPlace, r.inPlace]) {
      if (!m) continue;
      wrong += m.wrong ?? 0;
      sum += m.busBwGBs;
      n++;
    }
  }
  return { wrong, avgBusBwGBs: n ? sum / n : 0 };
}

export function formatFooter(rows: readonly BenchRow[]): string[] {
  const { wrong, avgBusBwGBs } = benchSummary(rows);
  return [`# Out of bounds values : ${wrong} ${wrong === 0 ? 'OK' : 'FAILED'}`, `# Avg bus bandwidth    : ${avgBusBwGBs.toFixed(4)} `, '#'];
}

export function formatTable(preamble: BenchPreamble, rows: readonly BenchRow[]): string {
  return [...formatPreamble(preamble), ...formatHeader(), ...rows.map(formatRow), ...formatFooter(rows)].join('\n') + '\n';
}
