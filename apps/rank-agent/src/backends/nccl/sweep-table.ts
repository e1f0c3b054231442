// nccl-tests-style table of a sweep's rows (out-of-place columns).
import type { NcclSweepRow } from './nccl-backend';

const GB = 1e9;

function pad(s: string, n: number): string {
  return s.length >= n ? s : ' '.repeat(n - s.length) + s;
}

export function formatSweepTable(rows: readonly NcclSweepRow[], title?: string): string {
  const lines: string[] = [];
  if (title) lines.push(`# ${title}`);
  lines.push(
    '#' +
      ['size', 'count', 'type', 'redop', 'root', 'time', 'algbw', 'busbw', '#wrong'].map((h, i) => pad(h, i === 0 ? 11 : 12)).join(''),
  );
  lines.push('#' + ['(B)', '(elements)', '', '', '', '(us)', '(GB/s)', '(GB/s)', ''].map((h, i) => pad(h, i === 0 ? 11 : 12)).join(''));
  for (const r of rows) {
    lines.push(
      ' ' +
        [
          pad(String(r.sizeBytes), 11),
          pad(String(r.count), 12),
          pad(r.dtype, 12),
          pad(r.redOp ?? 'none', 12),
          pad(r.root === null ? '-1' : String(r.root), 12),
          pad((r.timeSeconds * 1e6).toFixed(2), 12),
          pad((r.algbwBytesPerSecond / GB).toFixed(2), 12),
          pad((r.busbwBytesPerSecond / GB).toFixed(2), 12),
          pad(r.wrong === null ? 'N/A' : String(r.wrong), 12),
        ].join(''),
    );
  }
  return lines.join('\n');
}
