// The coordinator's live page (/ui), rendered on the server from the same records the REST API
// returns: agents, groups, service groups, recent jobs with their nccl-tests tables, the last scan's matrix with
// its flagged cells, and the ranks the flight recorders say are stuck. One HTML document, inline
// CSS, no script and nothing fetched from elsewhere (clusters are often cut off from the
// internet); it reloads itself every few seconds.
import type { AgentRecord, GroupRecord, JobRecord, ScanLink, ScanRecord, ServiceGroupSummary, TraceReport } from '@cmesh/protocol';
import { printable } from '@cmesh/protocol';

export interface UiData {
  cluster: string;
  replica: string;
  agents: AgentRecord[];
  groups: GroupRecord[];
  /** collectives as a service (GET /service-groups) */
  serviceGroups?: ServiceGroupSummary[];
  jobs: JobRecord[];
  scan: ScanRecord | null;
  /** the flight recorders' analysis (GET /traces); null when it could not be asked */
  traces?: TraceReport | null;
  now: Date;
  refreshS?: number;
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for HTML: every character that could open markup escaped, control characters shown escaped (printable). */
export const esc = (v: unknown) => printable(v ?? '').replace(/[&<>"']/g, (c) => ESC[c]);

/** Colours the tests look for in screenshots: a flagged cell is exactly FLAGGED_RGB. */
export const FLAGGED_RGB = [215, 25, 28] as const;

const CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:20px 0 6px}
table{border-collapse:collapse;margin:4px 0} td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f2f2f2} .num{text-align:right;font-variant-numeric:tabular-nums}
.state-ready,.state-succeeded,.ok{color:#1a7f37} .state-lost,.state-failed{color:#b91c1c;font-weight:bold} .state-busy,.state-running{color:#9a6700}
table.matrix td{text-align:right;min-width:56px}
td.cell-ok{background:#a6d96a} td.cell-warn{background:#fee08b} td.cell-slow,td.cell-fail{background:rgb(${FLAGGED_RGB.join(',')});color:#fff;font-weight:bold}
td.cell-self{background:#eee} td.cell-none{background:#fff}
.flagged{color:rgb(${FLAGGED_RGB.join(',')});font-weight:bold} .muted{color:#777} .verdict{font-weight:bold}
`;

function table(head: string[], rows: string[][], cls = ''): string {
  if (!rows.length) return '<p class="muted">none</p>';
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.join('')}</tr>`).join('')}</tbody></table>`;
}
const td = (v: unknown, cls = '') => `<td${cls ? ` class="${cls}"` : ''}>${esc(v)}</td>`;
const rate = (gbs: number) => (gbs >= 1 ? `${gbs.toFixed(2)} GB/s` : `${(gbs * 1000).toPrecision(3)} MB/s`);

function agentsSection(d: UiData): string {
  const rows = d.agents
    .slice()
    .sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }))
    .map((a) => [
      td(a.name),
      td(a.state, `state-${a.state}`),
      td(a.host),
      td(a.node ?? '-'),
      td(a.backends.map((b) => (b.available ? b.name : `${b.name} (unavailable)`)).join(', ')),
      td(`${a.device.kind}:${a.device.index}`),
      td(a.lastHeartbeat),
    ]);
  return `<h2>Agents (${d.agents.length})</h2>${table(['name', 'state', 'host', 'node', 'backends', 'device', 'last heartbeat'], rows, 'agents')}`;
}

function groupsSection(d: UiData): string {
  const rows = d.groups.map((g) => [td(g.id), td(g.name ?? ''), td(g.members.join(', ')), td(g.createdAt)]);
  return `<h2>Groups (${d.groups.length})</h2>${table(['id', 'name', 'members', 'created'], rows, 'groups')}`;
}

function serviceGroupsSection(d: UiData): string {
  const groups = d.serviceGroups ?? [];
  const rows = groups.map((g) => {
    const why = g.error ?? (g.end ? `${g.end.reason}${g.end.who ? ` ${g.end.who}` : ''}${g.end.error ? `: ${g.end.error.message}` : ''}` : '');
    const cls = g.state === 'placed' ? 'state-running' : g.end && g.end.reason !== 'left' ? 'state-failed' : '';
    return [
      td(g.name),
      td(g.round, 'num'),
      td(g.state === 'waiting' || g.state === 'queued' ? `${g.state} ${g.joined}/${g.elastic ? `${g.elastic.min}..${g.elastic.max}` : g.size}` : g.state, cls),
      td(g.backend ?? 'auto'),
      td(g.members.map((m) => `${m.rank ?? '-'} ${m.label ?? m.member}${m.agentName ? `@${m.agentName}` : ''}`).join(', ')),
      td(g.placedAt ?? ''),
      td(g.endedAt ?? ''),
      td(why),
    ];
  });
  return `<h2>Service groups (${groups.length})</h2>${table(['name', 'round', 'state', 'backend', 'members (rank label@agent)', 'placed', 'ended', 'why'], rows, 'service-groups')}`;
}

function jobsSection(d: UiData): string {
  const parts = d.jobs.map((j) => {
    const head = `<h3>${esc(j.id)} <span class="state-${esc(j.state)}">${esc(j.state)}</span> <span class="muted">${esc(j.sweep.op)} ${esc(j.sweep.backend)}, ${j.members.length} ranks (${esc(j.members.map((m) => m.name).join(', '))}), ${j.progress.done}/${j.progress.total} sizes${j.reason ? `: ${esc(j.reason)}` : ''}</span></h3>`;
    const rows = j.rows.map((r) => {
      const m = r.outOfPlace ?? r.inPlace;
      return [
        td(r.bytes, 'num'),
        td(r.count, 'num'),
        td(r.type),
        td(m ? m.timeUs.toFixed(1) : '-', 'num'),
        td(m ? m.algBwGBs.toFixed(3) : '-', 'num'),
        td(m ? m.busBwGBs.toFixed(3) : '-', 'num'),
        td(m?.wrong ?? 'N/A', 'num'),
      ];
    });
    return head + (rows.length ? table(['size (B)', 'count', 'type', 'time (us)', 'algbw (GB/s)', 'busbw (GB/s)', '#wrong'], rows, 'job-rows') : '');
  });
  return `<h2>Recent jobs (${d.jobs.length})</h2>${parts.join('') || '<p class="muted">none</p>'}`;
}

function cellClass(l: ScanLink | undefined): string {
  if (!l) return 'cell-none';
  if (l.state === 'failed') return 'cell-fail';
  if (l.state !== 'ok') return 'cell-none';
  if (l.slow) return 'cell-slow';
  return (l.ratio ?? 1) < 0.9 ? 'cell-warn' : 'cell-ok';
}

/** "; reference 1.2 GB/s", or per class when the scan had intra-node and inter-node links. */
function references(f: ScanRecord['findings']): string {
  const classes = (f?.byLink ?? []).filter((c) => c.referenceGBs);
  if (classes.length > 1) return `; references ${classes.map((c) => `${c.link.replace('_', '-')} ${esc(rate(c.referenceGBs!))}`).join(', ')}`;
  return f?.referenceGBs ? `; reference ${esc(rate(f.referenceGBs))}` : '';
}

function scanSection(d: UiData): string {
  const s = d.scan;
  if (!s) return '<h2>Last scan</h2><p class="muted">no scan yet (cmesh scan, POST /scans, or the coordinator\'s --scan-every)</p>';
  const flagged = new Set(s.findings?.flaggedAgents ?? []);
  const link = new Map<string, ScanLink>();
  for (const l of s.links) {
    link.set(`${l.a}\0${l.b}`, l);
    link.set(`${l.b}\0${l.a}`, l);
  }
  const top = Math.max(0, ...s.links.map((l) => l.bandwidthGBs ?? 0));
  const [unit, scale, digits] = top >= 1 ? ['GB/s', 1, 2] : ['MB/s', 1000, 1];
  const name = (n: string) => `<th${flagged.has(n) ? ' class="flagged"' : ''}>${esc(n)}</th>`;
  const rows = s.agents.map((r) => {
    const cells = s.agents.map((c) => {
      if (r === c) return '<td class="cell-self">-</td>';
      const l = link.get(`${r}\0${c}`);
      const text = !l ? '' : l.state === 'ok' ? (l.bandwidthGBs! * scale).toFixed(digits) : l.state;
      const cls = l?.link ? `, ${l.link.replace('_', '-')}` : '';
      const title = l?.ratio !== undefined ? ` title="${esc(`${r}<->${c}: ${l.ratio.toFixed(2)}x${cls}, ${l.latencyUs?.toFixed(0) ?? '-'} us`)}"` : '';
      return `<td class="${cellClass(l)}"${title}>${esc(text)}</td>`;
    });
    return `<tr>${name(r)}${cells.join('')}</tr>`;
  });
  const matrix = `<table class="matrix"><thead><tr><th></th>${s.agents.map(name).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
  const f = s.findings;
  const evidence = f?.evidence.length ? `<ul class="evidence">${f.evidence.map((e) => `<li class="flagged">${esc(e)}</li>`).join('')}</ul>` : '';
  const colls = s.collectives.length
    ? table(
        ['ring all-reduce', 'agents', `busbw (${unit})`],
        s.collectives.map((c) => [td(c.name), td(c.agents.join(', ')), td(c.state === 'ok' ? (c.busBwGBs! * scale).toFixed(digits) : c.state, 'num')]),
        'collectives',
      )
    : '';
  return (
    `<h2>Last scan <span class="muted">${esc(s.id)}, ${esc(s.state)}, ${esc(s.createdAt)}${s.wallMs !== undefined ? `, ${(s.wallMs / 1000).toFixed(1)} s` : ''}</span></h2>` +
    `<p>sendRecv bandwidth, ${unit} (${s.request.bandwidthBytes} B each way)${references(f)}</p>` +
    matrix +
    colls +
    evidence +
    `<p class="verdict${f && (f.flaggedAgents.length || f.flaggedLinks.length) ? ' flagged' : ''}">${esc(f?.verdict ?? s.reason ?? `${s.progress.done}/${s.progress.total}`)}</p>`
  );
}

/** A group is shown as stuck when a rank is not with the others, or waits this long (cmesh status --stuck). */
const STUCK_AFTER_S = 1;

function stuckSection(d: UiData): string {
  const t = d.traces;
  if (!t) return '<h2>Stuck ranks</h2><p class="muted">the flight recorders could not be asked</p>';
  const stuck = t.reports.filter((g) => g.stuck || (g.waiting.length > 0 && g.age_s >= STUCK_AFTER_S));
  const head = `<h2>Stuck ranks <span class="muted">${t.answered} ranks answered in ${t.waitedMs} ms</span></h2>`;
  if (!stuck.length) return `${head}<p class="muted">no stuck group</p>`;
  return `${head}<ul class="stuck">${stuck.map((g) => `<li class="flagged">${esc(g.text)}</li>`).join('')}</ul>`;
}

/** The whole page. */
export function renderUi(d: UiData): string {
  const refresh = d.refreshS ?? 5;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="${refresh}">
<title>cmesh ${esc(d.cluster)}</title><style>${CSS}</style></head>
<body><h1>cmesh: cluster ${esc(d.cluster)}</h1>
<p class="muted">coordinator replica ${esc(d.replica)}, ${esc(d.now.toISOString())}; reloads every ${refresh} s</p>
${scanSection(d)}
${stuckSection(d)}
${agentsSection(d)}
${groupsSection(d)}
${serviceGroupsSection(d)}
${jobsSection(d)}
</body></html>
`;
}
