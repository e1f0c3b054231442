// What a soak run found: every accepted job's outcome, every service member's call (joins and
// allReduces), how long each fault took to fail the jobs it hit, and how the processes that lived
// through the whole run grew.
import { isFinished } from '@cmesh/protocol';
import { canCause } from './causes';
import { Fault } from './faults';
import { ProcessSample } from './processes';
import { ServiceCall } from './service-workload';
import { ANSWER_MS, TrackedJob, Unanswered } from './workload';

export interface JobOutcomes {
  submitted: number;
  succeeded: number;
  /** failed, and the reason names a fault made while the job was open */
  failedExplained: number;
  /** every failed job's reason, for the reader to judge */
  failures: { id: string; reason: string }[];
  /** failed with a reason no fault of the run explains */
  failedUnexplained: { id: string; reason: string; faultsNear: string[]; openFrom: number; openUntil: number; output?: string[] }[];
  cancelled: number;
  /** never answered (the user never learnt a job id), or accepted and no replica knows the job any more */
  lost: string[];
  /** accepted, known, and still not ended when the soak gave up waiting */
  hung: { id: string; state: string }[];
  refused: number;
  /** refusals by message (numbers replaced by N) */
  refusals: Record<string, number>;
}

export interface Detection {
  kind: string;
  /** fault to the first failed job that names its target, ms */
  samplesMs: number[];
  p50Ms: number | null;
  p99Ms: number | null;
  /** the slowest detection's failure reason */
  slowest?: string;
}

export interface Growth {
  name: string;
  rssStartBytes: number;
  rssEndBytes: number;
  fdsStart: number;
  fdsEnd: number;
}

/** A service call that did not end well: what, where, and the faults near it. */
export interface ServiceFailure {
  group: string;
  rank: number;
  what: string;
  outcome: string;
  detail?: string;
  /** ms from the start of the call's window (join asked, or group placed) to its end */
  groupMs: number;
  faultsNear: string[];
  /** what the mesh's processes printed about the group */
  output?: string[];
}

export interface ServiceOutcomes {
  /** groups placed (both members joined) */
  groups: number;
  /** member joins: placed, failed with a typed error a fault explains, anything else */
  joins: { attempted: number; placed: number; failedExplained: number; failedUnexplained: ServiceFailure[]; hung: ServiceFailure[] };
  /** member allReduce calls: every element correct, failed with a typed error a fault explains, anything else */
  ops: {
    attempted: number;
    correct: number;
    elementsChecked: number;
    failedExplained: number;
    failedUnexplained: ServiceFailure[];
    wrong: ServiceFailure[];
    hung: ServiceFailure[];
  };
  /** failures by error (numbers and ids replaced by N), for the reader to judge */
  errors: Record<string, number>;
}

export interface SoakReport {
  seconds: number;
  faults: Record<string, number>;
  jobs: JobOutcomes;
  service?: ServiceOutcomes;
  detection: Detection[];
  growth: Growth[];
}

const ms = (iso?: string) => (iso ? Date.parse(iso) : NaN);

/**
 * A fault explains a failed job when the job was open while the fault lasted. A restarted agent
 * runs its first jobs cold (its job worker is still loading), so a rank fault also explains a
 * failure that blames the same agent within RANK_AFTERMATH_MS of its recovery.
 */
const RANK_AFTERMATH_MS = 10_000;
/**
 * The coordinators and agents are back on a restarted nats-server (or moved to another of the
 * cluster) only after their client's reconnect wait and resubscribing, and JetStream's streams
 * elect leaders again: until then a join finds nobody to answer and a job's store may be away.
 */
const NATS_AFTERMATH_MS = 5_000;
function explains(f: Fault, j: TrackedJob, end: number): boolean {
  const rec = j.last!;
  const rankFault = f.kind === 'kill-agent' || f.kind === 'pause-rank';
  const until = (f.recoveredAt ?? Infinity) + (rankFault ? RANK_AFTERMATH_MS : f.kind === 'kill-nats' ? NATS_AFTERMATH_MS : 0);
  if (f.at > end || until < j.submittedAt) return false;
  // and the failure is one this fault can cause (causes.ts)
  return canCause(f, { reason: rec.reason ?? '', failedAgent: rec.failedAgent });
}

export function classify(jobs: TrackedJob[], refused: string[], faults: Fault[], known: Set<string>, unanswered: Unanswered[] = []): JobOutcomes {
  const out: JobOutcomes = {
    submitted: jobs.length + unanswered.length,
    succeeded: 0,
    failedExplained: 0,
    failures: [],
    failedUnexplained: [],
    cancelled: 0,
    lost: [],
    hung: [],
    refused: refused.length,
    refusals: {},
  };
  for (const m of refused) {
    const key = m.replace(/\d+/g, 'N');
    out.refusals[key] = (out.refusals[key] ?? 0) + 1;
  }
  for (const u of unanswered) out.lost.push(`a submission never answered (key ${u.key}, ${u.attempts} attempts over ${ANSWER_MS} ms: ${u.lastError})`);
  for (const j of jobs) {
    const rec = j.last;
    if (!known.has(j.id) && !(rec && isFinished(rec.state))) out.lost.push(j.id);
    else if (!rec || !isFinished(rec.state)) out.hung.push({ id: j.id, state: rec?.state ?? 'unknown' });
    else if (rec.state === 'succeeded') out.succeeded++;
    else if (rec.state === 'cancelled') out.cancelled++;
    else {
      const reason = rec.reason ?? '(no reason)';
      out.failures.push({ id: j.id, reason });
      if (rec.reason && faults.some((f) => explains(f, j, ms(rec.finishedAt) || Date.now()))) out.failedExplained++;
      else {
        const end = ms(rec.finishedAt);
        const near = faults
          .filter((f) => Math.abs(f.at - j.submittedAt) < 30_000)
          .map((f) => `${f.kind} ${f.target} at ${f.at - j.submittedAt} ms, recovered ${(f.recoveredAt ?? NaN) - j.submittedAt} ms`);
        out.failedUnexplained.push({ id: j.id, reason, faultsNear: near, openFrom: j.submittedAt, openUntil: end });
      }
    }
  }
  return out;
}

/**
 * A fault explains a service call's failure when it lasted into the call's window (a join: from
 * asking for the group to its end; an op: from the group's placement to the op's end); a rank
 * fault only when it hit an agent of the group (or, for a join that failed before placement, any).
 */
function explainsService(f: Fault, c: ServiceCall): boolean {
  const rankFault = f.kind === 'kill-agent' || f.kind === 'pause-rank';
  const until = (f.recoveredAt ?? Infinity) + (rankFault ? RANK_AFTERMATH_MS : f.kind === 'kill-nats' ? NATS_AFTERMATH_MS : 0);
  if (f.at > c.endedAt || until < c.openFrom) return false;
  return canCause(f, { reason: c.detail ?? '', agents: c.agents, join: c.what === 'join' });
}

export function classifyService(calls: ServiceCall[], groups: number, faults: Fault[]): ServiceOutcomes {
  const out: ServiceOutcomes = {
    groups,
    joins: { attempted: 0, placed: 0, failedExplained: 0, failedUnexplained: [], hung: [] },
    ops: { attempted: 0, correct: 0, elementsChecked: 0, failedExplained: 0, failedUnexplained: [], wrong: [], hung: [] },
    errors: {},
  };
  for (const c of calls) {
    const join = c.what === 'join';
    const kind = join ? out.joins : out.ops;
    kind.attempted++;
    if (c.outcome === 'correct') {
      if (join) out.joins.placed++;
      else {
        out.ops.correct++;
        out.ops.elementsChecked += Number(/\[(\d+)\]/.exec(c.what)?.[1] ?? 0);
      }
      continue;
    }
    const failure: ServiceFailure = {
      group: c.group,
      rank: c.rank,
      what: c.what,
      outcome: c.outcome,
      detail: c.detail,
      groupMs: c.endedAt - c.openFrom,
      faultsNear: faults
        .filter((f) => f.at <= c.endedAt + 5000 && (f.recoveredAt ?? Infinity) >= c.openFrom - 30_000)
        .map((f) => `${f.kind} ${f.target} at ${f.at - c.openFrom} ms, recovered ${(f.recoveredAt ?? NaN) - c.openFrom} ms`),
    };
    if (c.outcome === 'wrong') out.ops.wrong.push(failure);
    else if (c.outcome === 'hung') kind.hung.push(failure);
    else {
      const key = `${join ? 'join' : 'allReduce'}: ${c.outcome === 'untyped' ? '(untyped) ' : ''}${(c.detail ?? '').replace(/[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{12,}|\d+/gi, 'N')}`;
      out.errors[key] = (out.errors[key] ?? 0) + 1;
      // only the library's typed errors are failures a user can handle; an explaining fault is still needed
      if (c.outcome === 'typed' && faults.some((f) => explainsService(f, c))) kind.failedExplained++;
      else kind.failedUnexplained.push(failure);
    }
  }
  return out;
}

export function percentile(xs: number[], p: number): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** For each rank fault: the time until the first job failed naming that rank. */
export function detection(jobs: TrackedJob[], faults: Fault[]): Detection[] {
  const byKind = new Map<string, { ms: number; reason: string }[]>();
  for (const f of faults) {
    if (f.kind !== 'kill-agent' && f.kind !== 'pause-rank') continue;
    // jobs open when the fault was made that failed naming its target
    const hits = jobs
      .filter((j) => j.submittedAt <= f.at && j.last?.state === 'failed' && j.last.failedAgent === f.target && ms(j.last.finishedAt) >= f.at)
      .map((j) => ({ ms: ms(j.last!.finishedAt) - f.at, reason: j.last!.reason ?? '' }))
      .sort((a, b) => a.ms - b.ms);
    // a fault that hit no job (the agent was idle) has nothing to detect
    if (hits.length) byKind.set(f.kind, [...(byKind.get(f.kind) ?? []), hits[0]]);
  }
  return [...byKind].map(([kind, hits]) => {
    const samplesMs = hits.map((h) => h.ms);
    const slowest = hits.reduce((a, b) => (b.ms > a.ms ? b : a));
    return { kind, samplesMs, p50Ms: percentile(samplesMs, 50), p99Ms: percentile(samplesMs, 99), slowest: `${slowest.ms} ms: ${slowest.reason}` };
  });
}

/** Processes sampled at both ends under the same pid (never restarted). */
export function growth(start: ProcessSample[], end: ProcessSample[]): Growth[] {
  return end.flatMap((e) => {
    const s = start.find((x) => x.name === e.name && x.pid === e.pid);
    return s ? [{ name: e.name, rssStartBytes: s.rssBytes, rssEndBytes: e.rssBytes, fdsStart: s.fds, fdsEnd: e.fds }] : [];
  });
}

export function formatReport(r: SoakReport): string {
  const j = r.jobs;
  const mb = (b: number) => (b / 2 ** 20).toFixed(1);
  const lines = [
    `soak: ${r.seconds.toFixed(0)} s, faults: ${
      Object.entries(r.faults)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }`,
    '',
    '| jobs submitted | succeeded | failed, reason names the fault | failed, unexplained | cancelled | lost | hung | refused at submit |',
    '|---|---|---|---|---|---|---|---|',
    `| ${j.submitted} | ${j.succeeded} | ${j.failedExplained} | ${j.failedUnexplained.length} | ${j.cancelled} | ${j.lost.length} | ${j.hung.length} | ${j.refused} |`,
    '',
    '| fault | faults that hit a job | detection p50 | detection p99 |',
    '|---|---|---|---|',
    ...r.detection.map((d) => `| ${d.kind} | ${d.samplesMs.length} | ${d.p50Ms} ms | ${d.p99Ms} ms |`),
    '',
    '| process (never restarted) | RSS start | RSS end | fds start | fds end |',
    '|---|---|---|---|---|',
    ...r.growth.map((g) => `| ${g.name} | ${mb(g.rssStartBytes)} MiB | ${mb(g.rssEndBytes)} MiB | ${g.fdsStart} | ${g.fdsEnd} |`),
  ];
  const sv = r.service;
  if (sv) {
    lines.push(
      '',
      `service groups placed: ${sv.groups}; elements checked: ${sv.ops.elementsChecked}`,
      '',
      '| service calls | attempted | every element correct / placed | failed, typed error, a fault explains | failed, unexplained | wrong result | hung |',
      '|---|---|---|---|---|---|---|',
      `| allReduce | ${sv.ops.attempted} | ${sv.ops.correct} | ${sv.ops.failedExplained} | ${sv.ops.failedUnexplained.length} | ${sv.ops.wrong.length} | ${sv.ops.hung.length} |`,
      `| join | ${sv.joins.attempted} | ${sv.joins.placed} | ${sv.joins.failedExplained} | ${sv.joins.failedUnexplained.length} | - | ${sv.joins.hung.length} |`,
    );
  }
  for (const d of r.detection) lines.push(`slowest ${d.kind} detection: ${d.slowest}`);
  for (const [m, n] of Object.entries(sv?.errors ?? {})) lines.push(`service failure (${n}x): ${m}`);
  const svBad = sv ? [...sv.ops.wrong, ...sv.ops.hung, ...sv.joins.hung, ...sv.ops.failedUnexplained, ...sv.joins.failedUnexplained] : [];
  for (const f of svBad) {
    lines.push(
      `service ${f.outcome === 'typed' || f.outcome === 'untyped' ? `unexplained ${f.outcome} failure` : f.outcome}: ${f.what} of ${f.group} rank ${f.rank}, ${f.groupMs} ms into the group's ${f.what === 'join' ? 'join' : 'life'} (faults near: ${f.faultsNear.join('; ') || 'none'}): ${f.detail ?? ''}`,
    );
    if (f.output?.length) lines.push('  what the mesh printed about the group:', ...f.output.map((l) => `  ${l}`));
  }
  for (const [m, n] of Object.entries(j.refusals)) lines.push(`refused at submit (${n}x): ${m}`);
  const reasons: Record<string, number> = {};
  for (const f of j.failures) {
    const key = f.reason.replace(/[0-9a-f]{12,}|\d+/gi, 'N');
    reasons[key] = (reasons[key] ?? 0) + 1;
  }
  for (const [m, n] of Object.entries(reasons)) lines.push(`job failed (${n}x): ${m}`);
  for (const u of j.failedUnexplained) {
    lines.push(
      `unexplained failure: ${u.id} (submitted, ended ${u.openUntil - u.openFrom} ms later; faults near its submission: ${u.faultsNear.join('; ') || 'none'}): ${u.reason}`,
    );
    if (u.output?.length) lines.push('  what the agents printed meanwhile:', ...u.output.map((l) => `  ${l}`));
  }
  for (const h of j.hung) lines.push(`hung: ${h.id} (${h.state})`);
  for (const l of j.lost) lines.push(`lost: ${l}`);
  return lines.join('\n');
}
