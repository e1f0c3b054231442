// What a member worker tells about its ops: the op running now, ops and bytes done (the answer
// on its group's status subject, for GET /service-groups/{name}), and the finished ops to its
// agent over IPC (FromMemberWorker), which records the group's metrics (AgentMetrics.onServiceOp).
import { elementSize, type CmeshError, type DType } from '@cmesh/collectives';
import { ServiceGroupOp, ServiceGroupOpName, ServiceGroupPlaced, ServiceGroupRankStatus, serviceGroupElements } from '@cmesh/protocol';

/** One op finished here. */
export interface ServiceGroupOpReport {
  /** the group's name (not its round: metric labels stay bounded) */
  name: string;
  op: ServiceGroupOpName;
  dtype: string;
  /** the group's world size (the op's bus-bandwidth factor) */
  size: number;
  /** nccl-tests' size of the op: serviceGroupOpBytes */
  bytes: number;
  /** from the op's data being complete here to its result */
  seconds: number;
  /** a failed op: the library's error code (TIMEOUT, PEER_FAILURE, …), else the error's class name */
  error?: string;
}
/**
 * member worker -> its agent: the ops finished since the last report. In batches: a message per
 * op would wake the agent's process once per op, on the cores the group's members and workers
 * need for their next op.
 */
interface ServiceGroupOpsReport {
  type: 'service-group-ops';
  ops: ServiceGroupOpReport[];
}
/** member worker -> its agent: a message on the group's subjects was dropped (the agent's cmesh_rejected_messages_total). */
interface ServiceGroupDroppedReport {
  type: 'service-group-dropped';
  /** the subject's pattern (svc.g.*.op, …): bounded */
  subject: string;
  reason: string;
  /** how many since the last report (the worker sends them in batches) */
  count: number;
}
export type FromMemberWorker = ServiceGroupOpsReport | ServiceGroupDroppedReport;

/** How long a finished op may wait for its report, and how many ops one report holds at most. */
const OP_REPORT_MS = 200;
const OP_REPORT_MAX = 1000;

/** nccl-tests' size of an op: its larger buffer, the root's for gather and scatter (0 for barrier). */
export function serviceGroupOpBytes(op: Pick<ServiceGroupOp, 'op' | 'count' | 'src' | 'dst' | 'dtype'>, size: number): number {
  if (op.op === 'barrier') return 0;
  const e = serviceGroupElements(op, op.dst ?? op.src ?? 0, size);
  return Math.max(e.in, e.out) * elementSize(op.dtype as DType);
}

export class MemberOpStats {
  private running: { op: ServiceGroupOp; t0: number; since: string } | null = null;
  private opsDone = 0;
  private bytes = 0;
  private unreported: ServiceGroupOpReport[] = [];
  private reportTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly placed: ServiceGroupPlaced,
    private readonly rank: number,
    private readonly report: (r: FromMemberWorker) => void,
  ) {}

  /** The op starts running on the library (its data is here). */
  begin(op: ServiceGroupOp): void {
    this.running = { op, t0: performance.now(), since: new Date().toISOString() };
  }

  /** The op finished, with `err` when it failed. */
  end(op: ServiceGroupOp, err?: Error): void {
    const t0 = this.running?.op.seq === op.seq ? this.running.t0 : performance.now();
    this.running = null;
    const bytes = serviceGroupOpBytes(op, this.placed.size);
    this.opsDone++;
    this.bytes += bytes;
    this.unreported.push({
      name: this.placed.name,
      op: op.op,
      dtype: op.dtype,
      size: this.placed.size,
      bytes,
      seconds: (performance.now() - t0) / 1000,
      ...(err ? { error: (err as CmeshError).code ?? err.name } : {}),
    });
    if (this.unreported.length >= OP_REPORT_MAX) this.flush();
    else this.reportTimer ??= setTimeout(() => this.flush(), OP_REPORT_MS);
  }

  /** Reports the finished ops not reported yet (before the worker exits). */
  flush(): void {
    if (this.reportTimer) clearTimeout(this.reportTimer);
    this.reportTimer = null;
    if (this.unreported.length === 0) return;
    const ops = this.unreported;
    this.unreported = [];
    this.report({ type: 'service-group-ops', ops });
  }

  /** This rank's answer on the status subject; `queued`: ops received that have not run yet. */
  status(queued: number): ServiceGroupRankStatus {
    const r = this.running;
    return {
      rank: this.rank,
      running: r ? { op: r.op.op, seq: r.op.seq, dtype: r.op.dtype, count: r.op.count, since: r.since } : null,
      queued,
      opsDone: this.opsDone,
      bytes: this.bytes,
    };
  }
}
