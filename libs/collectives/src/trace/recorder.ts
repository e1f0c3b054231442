// The flight recorder (torch's FlightRecorder): one bounded ring of this process's recent
// collectives and point-to-point ops, across its process groups, plus the ops still in flight.
// The hot path stores one small object per op and touches no string, array or clock beyond one
// performance.now() per state change; the torch-shaped dump (dump.ts) is built only when asked.
import { InvalidArgumentError } from '../errors';

/** torch's states, plus `failed` (torch marks those `completed` and leaves the error to the log). */
export type TraceState = 'scheduled' | 'started' | 'completed' | 'failed';

export const DEFAULT_TRACE_BUFFER_SIZE = 2000;
export const TRACE_BUFFER_ENV = 'CMESH_TRACE_BUFFER_SIZE';

/** One op as the recorder keeps it (times: ms on performance.now()'s clock; see toEpochNs). */
export interface TraceRecord {
  readonly recordId: number;
  readonly group: GroupTrace;
  /** the group's collective sequence number (the `seq` of error contexts); -1 for p2p */
  readonly seq: number;
  /** the group's p2p sequence number; -1 for collectives */
  readonly p2pSeq: number;
  readonly op: string;
  readonly algorithm: string;
  readonly dtype: string;
  readonly count: number;
  /** world ranks this op exchanges with: the group's members, or the p2p peer (-1: any source) */
  readonly peer: number;
  readonly timeoutMs: number;
  state: TraceState;
  readonly created: number;
  started: number;
  completed: number;
  error?: string;
}

/** What the recorder knows of one process group, kept by the ProcessGroup itself. */
export class GroupTrace {
  /** last collective seq issued, started, finished (torch's pg_status); -1 = none yet */
  lastEnqueued = -1;
  lastStarted = -1;
  lastCompleted = -1;
  lastCompletedOp = '';
  private p2pSeq = 0;

  constructor(
    readonly recorder: FlightRecorder,
    readonly pgId: number,
    /** world ranks of the members, in group-rank order */
    readonly ranks: readonly number[],
    readonly rank: number,
    readonly backend: string,
  ) {}

  /** A collective issued and handed to the backend (cmesh ops start when issued: no device queue). */
  collective(seq: number, op: string, algorithm: string, dtype: string, count: number, timeoutMs: number): TraceRecord {
    this.lastEnqueued = seq;
    this.lastStarted = seq;
    return this.recorder.add(this, seq, -1, op, algorithm, dtype, count, -2, timeoutMs);
  }

  p2p(op: 'send' | 'recv', peer: number | undefined, dtype: string, count: number, timeoutMs: number): TraceRecord {
    return this.recorder.add(this, -1, this.p2pSeq++, op, 'p2p', dtype, count, peer ?? -1, timeoutMs);
  }

  completed(r: TraceRecord): void {
    if (r.seq >= 0 && r.seq > this.lastCompleted) {
      this.lastCompleted = r.seq;
      this.lastCompletedOp = r.op;
    }
    this.recorder.finish(r, 'completed');
  }

  failed(r: TraceRecord, code: string): void {
    r.error = code;
    this.recorder.finish(r, 'failed');
  }
}

export class FlightRecorder {
  private readonly ring: (TraceRecord | undefined)[];
  private next = 0;
  private nextId = 0;
  /** in flight, oldest first (insertion order); kept apart so that a long wait outlives the ring */
  readonly inFlight = new Set<TraceRecord>();
  /** this process's world rank once a process group is initialized (-1 before) */
  rank = -1;

  constructor(readonly capacity: number = DEFAULT_TRACE_BUFFER_SIZE) {
    this.ring = new Array<TraceRecord | undefined>(capacity);
  }

  get enabled(): boolean {
    return this.capacity > 0;
  }

  group(pgId: number, ranks: readonly number[], rank: number, backend: string): GroupTrace {
    return new GroupTrace(this, pgId, ranks, rank, backend);
  }

  add(group: GroupTrace, seq: number, p2pSeq: number, op: string, algorithm: string, dtype: string, count: number, peer: number, timeoutMs: number): TraceRecord {
    const now = performance.now();
    const r: TraceRecord = { recordId: this.nextId++, group, seq, p2pSeq, op, algorithm, dtype, count, peer, timeoutMs, state: 'started', created: now, started: now, completed: 0 };
    this.ring[this.next] = r;
    this.next = this.next + 1 === this.capacity ? 0 : this.next + 1;
    this.inFlight.add(r);
    return r;
  }

  finish(r: TraceRecord, state: 'completed' | 'failed'): void {
    r.state = state;
    r.completed = performance.now();
    this.inFlight.delete(r);
  }

  /** The kept records, oldest first. */
  records(): TraceRecord[] {
    const out: TraceRecord[] = [];
    for (let i = 0; i < this.capacity; i++) {
      const r = this.ring[(this.next + i) % this.capacity];
      if (r) out.push(r);
    }
    return out;
  }

  /** The oldest op still in flight, if any. */
  oldestInFlight(): TraceRecord | undefined {
    for (const r of this.inFlight) return r;
    return undefined;
  }

  clear(): void {
    this.ring.fill(undefined);
    this.next = 0;
    this.inFlight.clear();
  }
}

/** Nanoseconds since the epoch of a performance.now() reading (torch's *_ns fields). */
export function toEpochNs(ms: number): number {
  return Math.round((performance.timeOrigin + ms) * 1e6);
}

/** CMESH_TRACE_BUFFER_SIZE: entries kept (default 2000; 0 turns the recorder off). */
export function traceBufferSize(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[TRACE_BUFFER_ENV];
  if (raw === undefined || raw.trim() === '') return DEFAULT_TRACE_BUFFER_SIZE;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 1_000_000) throw new InvalidArgumentError(`${TRACE_BUFFER_ENV} must be an integer in [0, 1000000], got ${JSON.stringify(raw)}`);
  return n;
}

let processRecorder: FlightRecorder | undefined;

/** The process's recorder (one for all its groups, like torch's), made on first use from the environment. */
export function flightRecorder(): FlightRecorder {
  processRecorder ??= new FlightRecorder(traceBufferSize());
  return processRecorder;
}

/** Replaces the process's recorder (tests; a program that sets the size itself before init). */
export function resetFlightRecorder(capacity: number = traceBufferSize()): FlightRecorder {
  processRecorder = new FlightRecorder(capacity);
  return processRecorder;
}
