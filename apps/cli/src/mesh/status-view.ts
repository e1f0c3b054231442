// `cmesh status` as text: agents, groups, service groups and recent jobs as tables. What peers
// named (agents, labels, hosts, reasons, end messages) is shown through printable(): a control
// character in it is escaped, never sent to the terminal.
import Table from 'cli-table3';
import { printableDeep, type JobRecord, type ServiceGroupSummary } from '@cmesh/protocol';
import type { AgentRow } from './launch';

const table = (head: string[]) => new Table({ head, style: { head: [], border: [] } });

function ago(iso: string | undefined, now: number): string {
  if (!iso) return '-';
  const ms = now - Date.parse(iso);
  return Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s ago` : iso;
}

export function agentsTable(rows: AgentRow[], busy: Record<string, string>, now = Date.now()): string {
  const agents = printableDeep(rows);
  busy = printableDeep(busy);
  const t = table(['agent', 'state', 'backends', 'node', 'last heartbeat', 'job']);
  for (const a of agents) t.push([a.name, a.state, clip(a.backends || '-', 60), a.node ?? '-', ago(a.lastHeartbeat, now), busy[a.agentId] ?? '-']);
  return `Agents (${agents.length}${nodesSummary(agents)})\n${t.toString()}`;
}

/** ", on 2 nodes: gpu-a 8 (7 ready), gpu-b 8": how the alive agents spread over nodes (placement packs jobs node by node); nothing for one node. */
export function nodesSummary(agents: readonly AgentRow[]): string {
  const byNode = new Map<string, { n: number; ready: number }>();
  for (const a of agents) {
    if (!a.node || !a.alive) continue;
    const x = byNode.get(a.node) ?? { n: 0, ready: 0 };
    x.n++;
    if (a.state === 'ready') x.ready++;
    byNode.set(a.node, x);
  }
  if (byNode.size < 2) return '';
  const list = [...byNode].map(([node, x]) => `${node} ${x.n}${x.ready < x.n ? ` (${x.ready} ready)` : ''}`);
  const shown = list.length > 8 ? [...list.slice(0, 8), `… ${list.length - 8} more`] : list;
  return `, on ${byNode.size} node${byNode.size > 1 ? 's' : ''}: ${shown.join(', ')}`;
}

/** Long reasons (an unavailable backend's) are cut in the table; --json has them whole. */
function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

export interface GroupRow {
  id: string;
  name?: string;
  members: string[];
  createdAt?: string;
}

export function groupsTable(rows: GroupRow[]): string {
  const groups = printableDeep(rows);
  const t = table(['group', 'name', 'members', 'created']);
  for (const g of groups) t.push([g.id, g.name ?? '-', g.members.join(', '), g.createdAt?.replace('T', ' ').slice(0, 19) ?? '-']);
  return `Groups (${groups.length})\n${t.toString()}`;
}

/** Service groups (GET /service-groups): each one's current round, its members and where they run, how it ended. */
export function serviceGroupsTable(rows: ServiceGroupSummary[], now = Date.now()): string {
  const groups = printableDeep(rows);
  const t = table(['service group', 'round', 'state', 'backend', 'members (rank label@agent)', 'placed', 'ended']);
  for (const g of groups) {
    const members = g.members.map((m) => `${m.rank ?? '-'} ${m.label ?? m.member.slice(0, 8)}${m.agentName ? `@${m.agentName}` : ''}`).join(', ');
    const want = g.elastic ? `${g.elastic.min}..${g.elastic.max}` : String(g.size);
    const state = g.state === 'waiting' || g.state === 'queued' ? `${g.state} ${g.joined}/${want}` : g.state;
    const why = g.error ?? (g.end ? `${g.end.reason}${g.end.who ? ` ${g.end.who}` : ''}${g.end.error ? `: ${g.end.error.message}` : ''}` : '');
    // before placement: the backend the members asked for, if any
    const backend = g.backend
      ? g.state === 'waiting' || g.state === 'queued'
        ? `${g.backend} (asked)`
        : g.backend
      : g.state === 'waiting' || g.state === 'queued'
        ? 'auto'
        : '-';
    t.push([
      g.name,
      String(g.round),
      state,
      backend,
      clip(members || '-', 80),
      ago(g.placedAt, now),
      g.endedAt || why ? clip(`${g.endedAt ? ago(g.endedAt, now) : ''}${why ? ` (${why})` : ''}`.trim(), 60) : '-',
    ]);
  }
  return `Service groups (${groups.length})\n${t.toString()}`;
}

export function jobsTable(rows: JobRecord[]): string {
  const jobs = printableDeep(rows);
  const t = table(['job', 'state', 'op', 'backend', 'agents', 'sizes', 'created', 'reason']);
  for (const j of jobs) {
    t.push([
      j.id,
      j.state,
      `${j.sweep.op} ${j.sweep.dtype}`,
      j.sweep.backend,
      j.members.map((m) => m.name).join(', ') || '-',
      `${j.progress.done}/${j.progress.total}`,
      j.createdAt.replace('T', ' ').slice(0, 19),
      (j.reason ?? '').slice(0, 60),
    ]);
  }
  return `Recent jobs (${jobs.length})\n${t.toString()}`;
}

export function normaliseGroups(body: unknown): GroupRow[] {
  const list = (Array.isArray(body) ? body : ((body as { groups?: unknown[] })?.groups ?? [])) as Record<string, unknown>[];
  return list.map((g) => ({
    id: String(g.groupId ?? g.id ?? g.name ?? '?'),
    members: Array.isArray(g.members)
      ? g.members.map((m) =>
          typeof m === 'string' ? m : String((m as Record<string, unknown>).name ?? (m as Record<string, unknown>).agentId ?? JSON.stringify(m)),
        )
      : [],
    name: typeof g.name === 'string' ? g.name : undefined,
    createdAt: typeof g.createdAt === 'string' ? g.createdAt : undefined,
  }));
}
