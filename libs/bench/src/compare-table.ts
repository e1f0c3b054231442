// Two sweeps of the same steps side by side (cmesh's nccl path beside torch.distributed's, as the
// GPU first run prints them): per collective, type and size, each side's time and busbw out of
// place and in place, N/A where a side has no such form (torch has all_reduce, broadcast and
// reduce in place only) or no such row.
import type { BenchMeasurement, BenchRow } from '@cmesh/protocol';
import { ncclTestsOp, ncclTestsType } from './nccl-tests-names';
import { formatTimeUs } from './table';

const pad = (v: string | number, w: number) => String(v).padStart(w);
const key = (r: BenchRow) => `${r.op}/${r.type}/${r.redop}/${r.root}/${r.bytes}`;

function cell(m: BenchMeasurement | null | undefined): string {
  return m ? `${pad(formatTimeUs(m.timeUs), 8)} ${pad(m.busBwGBs.toFixed(2), 7)}` : `${pad('N/A', 8)} ${pad('N/A', 7)}`;
}

export function formatComparison(left: readonly BenchRow[], right: readonly BenchRow[], labels: [string, string]): string[] {
  const other = new Map(right.map((r) => [key(r), r]));
  const lines: string[] = [];
  let op = '';
  const w = cell(null).length;
  for (const r of left) {
    if (r.op !== op) {
      op = r.op;
      lines.push(
        `# ${ncclTestsOp(r.op)}, world ${r.nranks}: time (us) and busbw (GB/s) per side`,
        `#${pad('size', 11)}  ${pad('type', 8)}  ${pad(`${labels[0]} out-of-place`, w)}  ${pad(`${labels[1]} out-of-place`, w)}  ${pad(`${labels[0]} in-place`, w)}  ${pad(`${labels[1]} in-place`, w)}`,
      );
    }
    const t = other.get(key(r));
    lines.push(
      ` ${pad(r.bytes, 11)}  ${pad(ncclTestsType(r.type), 8)}  ${cell(r.outOfPlace)}  ${cell(t?.outOfPlace)}  ${cell(r.inPlace)}  ${cell(t?.inPlace)}`,
    );
  }
  return lines;
}
