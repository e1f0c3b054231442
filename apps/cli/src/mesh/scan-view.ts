// `cmesh scan`'s terminal view of a ScanRecord: the nodes, the bandwidth and latency matrices
// (heat-coloured by each link's ratio to its class's reference when colour is on; `*` marks an
// intra-node link when the scan spans several nodes), the link classes (intra-node, inter-node)
// each with its reference, the ring all-reduces, the agents' figures, the evidence and the verdict. Agent names and reasons come from peers: a control
// character in them is escaped (printable), never sent to the terminal.
import { printableDeep, type LinkClass, type ScanLink, type ScanRecord } from '@cmesh/protocol';

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
  // with both classes present, an intra-node cell carries a '*' (its figures are read against NVLink's, not the network's)
  const mark = new Set(rec.links.map((l) => l.link)).size > 1;
  const body = (l: ScanLink) => (l.state === 'ok' ? cell(l) : l.state === 'pending' ? '...' : l.state === 'failed' ? 'fail' : 'skip');
  // every cell keeps one column for the mark, so the numbers stay aligned
  const tail = (l: ScanLink | undefined) => (!mark ? '' : l?.link === 'intra_node' ? '*' : ' ');
  const text = (l: ScanLink | undefined) => `${!l ? '' : body(l)}${tail(l)}`;
  const w = Math.max(6, ...names.map((n) => n.length), ...rec.links.map((l) => text(l).length));
  const lines = [' '.repeat(w) + names.map((n) => ' ' + `${n}${mark ? ' ' : ''}`.padStart(w)).join('')];
  for (const r of names) {
    let line = paint(colour && flagged.has(r), '1;31', r.padEnd(w));
    for (const c of names) {
      if (r === c) {
        line += ' ' + `-${tail(undefined)}`.padStart(w);
        continue;
      }
      const l = link.get(`${r}\0${c}`);
      line += ' ' + paint(colour && !!l && l.state !== 'pending', heat(l), text(l).padStart(w));
    }
    lines.push(line);
  }
  return lines;
}

const classText = (c: LinkClass) => c.replace('_', '-');

/** The scan's nodes and their agents in the scan's order; none when no agent named its node. */
function nodesOf(rec: ScanRecord): [string, string[]][] {
  const out = new Map<string, string[]>();
  for (const a of rec.agents) {
    const n = rec.nodes?.[a];
    if (n !== undefined) out.set(n, [...(out.get(n) ?? []), a]);
  }
  return [...out];
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
  // the agents' nodes: a column of the agents' table over several nodes, and this line when a node holds several agents
  const byNode = nodesOf(rec);
  const several = byNode.length > 1;
  if (several && byNode.some(([, agents]) => agents.length > 1)) out.push(`nodes: ${byNode.map(([n, agents]) => `${n} (${agents.join(', ')})`).join(', ')}`);
  const unit = bwUnit(rec);
  out.push('', `bandwidth, ${unit.name} (sendRecv ${bytes(r.bandwidthBytes)} each way, median of ${r.iters})`);
  out.push(...matrix(rec, colour, (l) => unit.cell(l.bandwidthGBs!)));
  out.push('', `latency, us (sendRecv ${bytes(r.latencyBytes)})`);
  out.push(...matrix(rec, colour, (l) => l.latencyUs!.toFixed(0)));
  if (new Set(rec.links.map((l) => l.link)).size > 1) out.push('* intra-node link (both agents on one node)');
  const classes = rec.findings?.byLink ?? [];
  if (classes.length) {
    out.push('', 'links by class (each against its own reference)');
    out.push(`  ${'class'.padEnd(10)}  links  reference ${unit.name}  spread ${unit.name}  median us  flagged`);
    for (const c of classes) {
      const ref = c.referenceGBs === null ? '-' : unit.cell(c.referenceGBs);
      const spread = c.spreadGBs === null ? '-' : unit.cell(c.spreadGBs);
      const lat = c.medianLatencyUs === null ? '-' : c.medianLatencyUs.toFixed(0);
      const flagged = c.flaggedAgents.length + c.flaggedLinks.length;
      const line = `  ${classText(c.link).padEnd(10)}  ${`${c.measured}/${c.links}`.padStart(5)}  ${ref.padStart(14)}  ${spread.padStart(11)}  ${lat.padStart(9)}  ${String(flagged).padStart(7)}`;
      out.push(paint(colour && flagged > 0, '1;31', line));
    }
  }
  if (rec.collectives.length) {
    out.push('', `ring all-reduce ${bytes(rec.collectives[0].bytes)}, busbw ${unit.name}`);
    for (const c of rec.collectives) {
      const v = c.state === 'ok' ? unit.cell(c.busBwGBs!) : c.state;
      out.push(`  ${c.name.padEnd(6)} ${v.padStart(8)}  ${c.agents.join(', ')}${c.reason ? `  (${c.reason})` : ''}`);
    }
  }
  const f = rec.findings;
  if (f) {
    const both = classes.length > 1;
    // over both classes an agent's figures are its worst class's, named in the 'class' column
    out.push('', both ? "agents (each one's worst class)" : `agents (reference ${rate(f.referenceGBs)}, spread ${rate(f.spreadGBs)})`);
    const w = Math.max(5, ...f.agents.map((a) => a.agent.length));
    const nw = Math.max(4, ...f.agents.map((a) => (rec.nodes?.[a.agent] ?? '-').length));
    const nodeCol = (a: string) => (several ? `  ${(rec.nodes?.[a] ?? '-').padEnd(nw)}` : '');
    const classCol = (c: LinkClass | undefined) => (both ? `  ${(c ? classText(c) : '-').padEnd(10)}` : '');
    out.push(
      `  ${'agent'.padEnd(w)}${several ? `  ${'node'.padEnd(nw)}` : ''}${both ? `  ${'class'.padEnd(10)}` : ''}  median ${unit.name}  ratio  median us  slow links`,
    );
    for (const a of f.agents) {
      const line =
        `  ${a.agent.padEnd(w)}${nodeCol(a.agent)}${classCol(a.link)}  ${(a.medianBandwidthGBs === null ? '-' : unit.cell(a.medianBandwidthGBs)).padStart(11)}` +
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
