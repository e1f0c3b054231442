// Which rank is stuck, and where: the one analysis of flight recorder dumps (or the summaries ranks
// exchange), shared by a timeout's error message, `cmesh trace merge DIR`, the coordinator's
// GET /groups/{id}/trace and `cmesh status --stuck`. Pure: dumps in, reports out.
//
// Per process group: the ranks in the latest collective any member is in (or failed in) are
// "waiting"; ranks in that collective with another signature are a mismatch; every other member
// is named with the last collective it finished and what it is doing now (torch's desync report).
import type { TraceDump, TraceEntry } from './dump';

/** What one rank is in: a collective (seq >= 0) or a send/recv (p2p, peer). */
export interface OpView {
  op: string;
  pg: string;
  seq: number;
  p2p: boolean;
  peer: number | null;
  dtype: string | null;
  count: number | null;
  since_ns: number;
  /** the error code when the op failed (a timeout, ...), null while in flight */
  error: string | null;
}

export interface RankView {
  rank: number;
  /** false: no dump or summary from this rank (gone, stopped, or its answer came too late) */
  answered: boolean;
  last_completed: number;
  last_completed_op: string;
  /** the collective of this group it is in (or failed in last) */
  current: OpView | null;
  /** the oldest op it is in elsewhere (another group, a send or recv) */
  elsewhere: OpView | null;
  /** in the group's latest collective with another op, dtype or count */
  mismatch: boolean;
}

export interface GroupReport {
  job?: string;
  /**
   * Set when the caller says which jobs' answers it authenticated (AnalyzeOptions.verified):
   * false for a job whose answers nobody could check (anyone allowed to answer may have made them up)
   */
  verified?: boolean;
  pg: string;
  /** world ranks of the members */
  ranks: number[];
  /** the latest collective any member is in; undefined when none is */
  seq?: number;
  op?: string;
  /** ranks in (or timed out in) that collective with the majority's signature */
  waiting: number[];
  since_ns?: number;
  /** seconds since the earliest waiting rank entered it (at the analysis's `nowNs`) */
  age_s: number;
  /** members not waiting: behind, elsewhere, mismatched or silent (at most MAX_SILENT_LISTED of the silent ones) */
  lagging: RankView[];
  /** some rank waits while another is not with it */
  stuck: boolean;
  /** one line per fact, as printed */
  lines: string[];
  /** "group 0: ranks 0,2,3 waiting in allReduce #183 since 12:03:04.2; rank 1 finished ..." */
  text: string;
}

export interface AnalyzeOptions {
  /** now, for ages (default: the newest dump's time_ns) */
  nowNs?: number;
  /**
   * Whether the answers of a job were authenticated (the coordinator checked their MACs); when
   * given, each report says so, and an unverified one is marked "(unverified)" in its text
   */
  verified?: (job: string | undefined) => boolean;
}

const inFlight = (e: TraceEntry) => e.state === 'scheduled' || e.state === 'started';

function view(e: TraceEntry): OpView {
  return {
    op: e.op,
    pg: String(e.pg_id),
    seq: e.is_p2p ? e.p2p_seq_id : e.collective_seq_id,
    p2p: e.is_p2p,
    peer: e.peer,
    dtype: e.input_dtypes[0] ?? e.output_dtypes[0] ?? null,
    count: (e.input_sizes[0] ?? e.output_sizes[0])?.[0] ?? null,
    since_ns: e.time_discovered_started_ns ?? e.time_created_ns,
    error: e.error,
  };
}

/** "12:03:04.2" (UTC) */
export function clockTime(ns: number): string {
  return new Date(ns / 1e6).toISOString().slice(11, 21);
}

function rankList(ranks: number[]): string {
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${ranks.join(',')}`;
}

function describeOp(v: OpView, pg: string): string {
  if (v.p2p) return `${v.op} ${v.op === 'send' ? 'to' : 'from'} ${v.peer === -1 ? 'any rank' : `rank ${v.peer}`}${v.pg !== pg ? ` in group ${v.pg}` : ''}`;
  return `${v.op} #${v.seq}${v.pg !== pg ? ` of group ${v.pg}` : ''}`;
}

function rankView(d: TraceDump | undefined, rank: number, pg: string): RankView {
  if (!d) return { rank, answered: false, last_completed: -1, last_completed_op: '', current: null, elsewhere: null, mismatch: false };
  const status = d.pg_status[pg];
  const mine = d.entries.filter((e) => String(e.pg_id) === pg && !e.is_p2p);
  const lastCompleted = status?.last_completed_collective ?? -1;
  let current = mine.filter(inFlight).sort((a, b) => a.collective_seq_id - b.collective_seq_id)[0];
  // after a timeout the op is failed, no longer in flight: it is still where the rank stopped
  current ??= mine.filter((e) => e.state === 'failed' && e.collective_seq_id > lastCompleted).sort((a, b) => b.collective_seq_id - a.collective_seq_id)[0];
  const elsewhere = d.entries
    .filter((e) => inFlight(e) && e !== current && (e.is_p2p || String(e.pg_id) !== pg))
    .sort((a, b) => a.time_created_ns - b.time_created_ns)[0];
  let lastOp = status?.last_completed_op ?? '';
  if (!lastOp) lastOp = mine.find((e) => e.collective_seq_id === lastCompleted)?.op ?? '';
  return {
    rank,
    answered: true,
    last_completed: lastCompleted,
    last_completed_op: lastOp,
    current: current ? view(current) : null,
    elsewhere: elsewhere ? view(elsewhere) : null,
    mismatch: false,
  };
}

const signatureOf = (v: OpView) => `${v.op}/${v.dtype}/${v.count}`;

function finished(v: RankView): string {
  return v.last_completed < 0
    ? `rank ${v.rank} finished no collective of this group`
    : `rank ${v.rank} finished ${v.last_completed_op || 'collective'} #${v.last_completed}`;
}

/** The sentence about one member that is not with the waiting ranks. */
export function describeLagging(v: RankView, seq: number, pg: string): string {
  if (!v.answered) return `rank ${v.rank} did not answer (gone, stopped or busy)`;
  const now = v.elsewhere ? `; now in ${describeOp(v.elsewhere, pg)} since ${clockTime(v.elsewhere.since_ns)}` : '';
  if (v.current && v.current.seq === seq && v.mismatch) {
    return `${finished(v)}, now in ${v.current.op}${v.current.dtype ? `(${v.current.dtype}, count=${v.current.count})` : ''} #${seq} (mismatch)`;
  }
  if (v.last_completed >= seq) return `${finished(v)}, already past #${seq}${now}`;
  if (v.current && v.current.seq < seq)
    return `${finished(v)} but is still in ${describeOp(v.current, pg)} since ${clockTime(v.current.since_ns)}${v.current.error ? ` (${v.current.error})` : ''}${now}`;
  return `${finished(v)} but did not join #${seq}${now || ' (in no collective)'}`;
}

/** Ranks that did not answer named one by one at most; the rest are counted ("and N more ..."). */
export const MAX_SILENT_LISTED = 32;

const max = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b), -Infinity);
const min = (xs: number[]) => xs.reduce((a, b) => Math.min(a, b), Infinity);

/** The members to name (every one that answered, the first silent ones) and the line about the rest. */
function named(views: RankView[]): { listed: RankView[]; more: string[] } {
  let silent = 0;
  const listed = views.filter((v) => v.answered || ++silent <= MAX_SILENT_LISTED);
  const rest = silent - MAX_SILENT_LISTED;
  return { listed, more: rest > 0 ? [`and ${rest} more ${rest === 1 ? 'rank' : 'ranks'} did not answer`] : [] };
}

function analyzeGroup(job: string | undefined, pg: string, ranks: number[], byRank: Map<number, TraceDump>, nowNs: number, verified?: boolean): GroupReport {
  const views = ranks.map((r) => rankView(byRank.get(r), r, pg));
  const current = views.filter((v) => v.current);
  const label = `group ${pg}${job ? ` of ${job}` : ''}${verified === false ? ' (unverified)' : ''}`;
  const checked = verified === undefined ? {} : { verified };
  if (!current.length) {
    const done = views.filter((v) => v.answered).map((v) => v.last_completed);
    const { listed: silent, more } = named(views.filter((v) => !v.answered));
    const lines = [done.length ? `no collective in flight; last completed #${max(done)}` : 'no rank answered'];
    for (const v of silent) lines.push(describeLagging(v, -1, pg));
    lines.push(...more);
    return { job, ...checked, pg, ranks, waiting: [], age_s: 0, lagging: silent, stuck: false, lines, text: `${label}: ${lines.join('; ')}` };
  }
  const seq = max(current.map((v) => v.current!.seq));
  const atSeq = current.filter((v) => v.current!.seq === seq);
  // the majority's signature is the expected one; the others at this seq are a mismatch
  const counts = new Map<string, number>();
  for (const v of atSeq) counts.set(signatureOf(v.current!), (counts.get(signatureOf(v.current!)) ?? 0) + 1);
  const expected = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
  const waiting = atSeq.filter((v) => signatureOf(v.current!) === expected);
  for (const v of atSeq) v.mismatch = signatureOf(v.current!) !== expected;
  const waitingRanks = waiting.map((v) => v.rank);
  const isWaiting = new Set(waitingRanks);
  const behind = views.filter((v) => !isWaiting.has(v.rank));
  const { listed: lagging, more } = named(behind);
  const since = min(waiting.map((v) => v.current!.since_ns));
  const first = waiting[0].current!;
  const allFailed = waiting.every((v) => v.current!.error);
  const lines = [`${rankList(waitingRanks)} ${allFailed ? `timed out (${first.error})` : 'waiting'} in ${first.op} #${seq} since ${clockTime(since)}`];
  for (const v of lagging) lines.push(describeLagging(v, seq, pg));
  lines.push(...more);
  return {
    job,
    ...checked,
    pg,
    ranks,
    seq,
    op: first.op,
    waiting: waitingRanks,
    since_ns: since,
    age_s: Math.max(0, (nowNs - since) / 1e9),
    lagging,
    stuck: behind.length > 0,
    lines,
    text: `${label}: ${lines.join('; ')}`,
  };
}

/**
 * One report per (job, process group) found in the dumps, in job then group order. A member of a
 * group without a dump is reported as not answering.
 */
export function analyzeTraces(dumps: readonly TraceDump[], opts: AnalyzeOptions = {}): GroupReport[] {
  const nowNs = opts.nowNs ?? Math.max(0, max(dumps.map((d) => d.time_ns)));
  const jobs = new Map<string, TraceDump[]>();
  for (const d of dumps) {
    const key = d.job ?? '';
    const list = jobs.get(key);
    if (list) list.push(d);
    else jobs.set(key, [d]);
  }
  const reports: GroupReport[] = [];
  for (const [job, ds] of [...jobs.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const byRank = new Map<number, TraceDump>();
    for (const d of ds) if (!byRank.has(d.rank) || byRank.get(d.rank)!.time_ns < d.time_ns) byRank.set(d.rank, d);
    const groups = new Map<string, number[]>();
    for (const d of byRank.values()) for (const [pg, cfg] of Object.entries(d.pg_config)) if (!groups.has(pg)) groups.set(pg, [...cfg.ranks]);
    const verified = opts.verified?.(job || undefined);
    for (const [pg, ranks] of [...groups.entries()].sort((a, b) => Number(a[0]) - Number(b[0])))
      reports.push(analyzeGroup(job || undefined, pg, ranks, byRank, nowNs, verified));
  }
  return reports;
}

/** The reports as text, one group per line (what `cmesh trace merge` and `cmesh status --stuck` print). */
export function formatReports(reports: readonly GroupReport[]): string {
  return reports.map((r) => r.text).join('\n');
}
