// `cmesh scan`'s terminal view of a ScanRecord: the bandwidth and latency matrices (heat-coloured
// by each link's ratio to the reference when colour is on), the ring all-reduces, the agents'
// figures, the evidence and the verdict. Agent names and reasons come from peers: a control
// character in them is escaped (printable), never sent to the terminal.
import { printableDeep, type ScanLink, type ScanRecord } from '@cmesh/protocol';

/** Colour when stdout is a terminal and NO_COLOR is unset (https://no-color.org). */
export function useColour(stream: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  return !!stream.isTTY && !env.NO_COLOR;
}

const ESC = '\u001b[';
const paint = (on: boolean, code: string, s: string) => (on ? `${ESC}${code}m${s}${ESC}0m` : s);

/** Heat of a link: green near the reference, yellow below 0.9x, red when slow. */
function heat(l: ScanLink | undefined): string {
  if (!l || l.state !== 'ok') return '31';
  if (l.slow) return '1;31';
  if ((l.ratio ?? 1) < 0.9) return '33';
  return '32';
}

function bytes(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n >> 20} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n >> 10} KiB`;
  return `${n} B`;
}

/** The bandwidth matrix's unit: GB/s when the fastest link reaches 1 GB/s, MB/s below. */
function bwUnit(rec: ScanRecord): { name: string; cell: (gbs: number) => string } {
  const top = Math.max(0, ...rec.links.map((l) => l.bandwidthGBs ?? 0));
  return top >= 1 ? { name: 'GB/s', cell: (x) => x.toFixed(2) } : { name: 'MB/s', cell: (x) => (x * 1000).toFixed(1) };
}

const rate = (gbs: number | null) => (gbs === null ? '-' : gbs >= 1 ? `${gbs.toFixed(2)} GB/s` : `${(gbs * 1000).toPrecision(3)} MB/s`);

function matrix(rec: ScanRecord, colour: boolean, cell: (l: ScanLink) => string): string[] {
  const names = rec.agents;
  const flagged = new Set(rec.findings?.flaggedAgents ?? []);
  const link = new Map<string, ScanLink>();
  for (const l of rec.links) {
    link.set(`${l.a}\0${l.b}`, l);
    link.set(`${l.b}\0${l.a}`, l);
  }
  const text = (l: ScanLink | undefined) => (!l ? '' : l.state === 'ok' ? cell(l) : l.state === 'pending' ? '...' : l.state === 'failed' ? 'fail' : 'skip');
  const w = Math.max(6, ...names.map((n) => n.length), ...rec.links.map((l) => text(l).length));
  const lines = [' '.repeat(w) + names.map((n) => ' ' + n.padStart(w)).join('')];
  for (const r of names) {
    let line = paint(colour && flagged.has(r), '1;31', r.padEnd(w));
    for (const c of names) {
      if (r === c) {
        line += ' ' + '-'.padStart(w);
        continue;
      }
      const l = link.get(`${r}\0${c}`);
      line += ' ' + paint(colour && !!l && l.state !== 'pending', heat(l), text(l).padStart(w));
    }
    lines.push(line);
  }
  return lines;
}

/** The whole view of a scan. */
export function renderScan(record: ScanRecord, colour = false): string {
  const rec = printableDeep(record);
  const r = rec.request;
  const out: string[] = [];
  const took = rec.wallMs !== undefined ? ` in ${(rec.wallMs / 1000).toFixed(1)} s` : '';
  out.push(
    `scan ${rec.id} ${rec.state}${took}: ${rec.agents.length} agents, ${rec.rounds} rounds, ${rec.links.length} pairs` +
      ` (sendRecv ${bytes(r.latencyBytes)} and ${bytes(r.bandwidthBytes)}, ${r.iters} iterations, ${r.backend}; ${rec.trigger})`,
  );
  if (rec.state === 'running') out.push(`progress ${rec.progress.done}/${rec.progress.total}`);
  const unit = bwUnit(rec);
  out.push('', `bandwidth, ${unit.name} (sendRecv ${bytes(r.bandwidthBytes)} each way, median of ${r.iters})`);
  out.push(...matrix(rec, colour, (l) => unit.cell(l.bandwidthGBs!)));
  out.push('', `latency, us (sendRecv ${bytes(r.latencyBytes)})`);
  out.push(...matrix(rec, colour, (l) => l.latencyUs!.toFixed(0)));
  if (rec.collectives.length) {
    out.push('', `ring all-reduce ${bytes(rec.collectives[0].bytes)}, busbw ${unit.name}`);
    for (const c of rec.collectives) {
      const v = c.state === 'ok' ? unit.cell(c.busBwGBs!) : c.state;
      out.push(`  ${c.name.padEnd(6)} ${v.padStart(8)}  ${c.agents.join(', ')}${c.reason ? `  (${c.reason})` : ''}`);
    }
  }
  const f = rec.findings;
  if (f) {
    out.push('', `agents (reference ${rate(f.referenceGBs)}, spread ${rate(f.spreadGBs)})`);
    const w = Math.max(5, ...f.agents.map((a) => a.agent.length));
    out.push(`  ${'agent'.padEnd(w)}  median ${unit.name}  ratio  median us  slow links`);
    for (const a of f.agents) {
      const line =
        `  ${a.agent.padEnd(w)}  ${(a.medianBandwidthGBs === null ? '-' : unit.cell(a.medianBandwidthGBs)).padStart(11)}` +
        `  ${(a.ratio === null ? '-' : a.ratio.toFixed(2)).padStart(5)}  ${(a.medianLatencyUs === null ? '-' : a.medianLatencyUs.toFixed(0)).padStart(9)}` +
        `  ${`${a.slowLinks} of ${a.links}`.padStart(10)}${a.flagged ? '  FLAGGED' : ''}`;
      out.push(paint(colour && a.flagged, '1;31', line));
    }
    if (f.evidence.length) out.push('', 'evidence', ...f.evidence.map((e) => `  ${e}`));
    out.push('', paint(colour, f.flaggedAgents.length || f.flaggedLinks.length ? '1;31' : '1;32', `verdict: ${f.verdict}`));
  } else if (rec.reason) out.push('', `reason: ${rec.reason}`);
  return out.join('\n') + '\n';
}

/** `cmesh scan --list`: one line per scan. */
export function renderScanList(records: readonly ScanRecord[]): string {
  const scans = printableDeep(records);
  if (!scans.length) return 'no scans\n';
  const rows = scans.map((s) => [
    s.id,
    s.createdAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    s.state,
    s.trigger,
    String(s.agents.length),
    s.wallMs === undefined ? '-' : `${(s.wallMs / 1000).toFixed(1)} s`,
    s.findings?.verdict ?? s.reason ?? `${s.progress.done}/${s.progress.total}`,
  ]);
  const head = ['id', 'created', 'state', 'trigger', 'agents', 'took', 'verdict'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(w[i]))).join('  ');
  return [fmt(head), ...rows.map(fmt)].join('\n') + '\n';
}
