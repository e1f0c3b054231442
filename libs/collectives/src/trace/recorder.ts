// The flight recorder (torch's FlightRecorder): one bounded ring of this process's recent
// collectives and point-to-point ops, across its process groups, plus the ops still in flight.
// The hot path stores one small object per op and touches no string, array or clock beyond one
// performance.now() per state change; the torch-shaped dump (dump.ts) is built only when asked.
import { InvalidArgumentError } from '../errors';

/** torch's states, plus `failed` (torch marks those `completed` and leaves the error to the log). */
export type TraceState = 'scheduled' | 'started' | 'completed' | 'failed';

export const DEFAULT_TRACE_BUFFER_SIZE = 2000;
export const TRACE_BUFFER_ENV = 'CMESH_TRACE_BUFFER_SIZE';

/**
 * One op as the recorder keeps it (times: ms on performance.now()'s clock; see toEpochNs). Records
 * are reused when the ring wraps (no allocation per op, nothing for the GC to promote), except one
 * still in flight, which keeps its object.
 */
export interface TraceRecord {
  recordId: number;
  group: GroupTrace;
  /** the group's collective sequence number (the `seq` of error contexts); -1 for p2p */
  seq: number;
  /** the group's p2p sequence number; -1 for collectives */
  p2pSeq: number;
  op: string;
  algorithm: string;
  dtype: string;
  count: number;
  /** p2p: the other world rank (-1: any source); collectives: -2 (every member) */
  peer: number;
  timeoutMs: number;
  state: TraceState;
  created: number;
  started: number;
  completed: number;
  error: string | undefined;
  /** neighbours in the in-flight list (oldest first) */
  prevInFlight: TraceRecord | undefined;
  nextInFlight: TraceRecord | undefined;
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
  /** `now`: the caller's performance.now() at the call, when it has one (a clock read is most of the cost) */
  collective(seq: number, op: string, algorithm: string, dtype: string, count: number, timeoutMs: number, now = performance.now()): TraceRecord {
    this.lastEnqueued = seq;
    this.lastStarted = seq;
    return this.recorder.add(this, seq, -1, op, algorithm, dtype, count, -2, timeoutMs, now);
  }

  p2p(op: 'send' | 'recv', peer: number | undefined, dtype: string, count: number, timeoutMs: number): TraceRecord {
    return this.recorder.add(this, -1, this.p2pSeq++, op, 'p2p', dtype, count, peer ?? -1, timeoutMs, performance.now());
  }

  completed(r: TraceRecord): void {
    if (r.seq >= 0 && r.seq > this.lastCompleted) {
      this.lastCompleted = r.seq;
      this.lastCompletedOp = r.op;
    }
    this.recorder.finish(r, 'completed');
  }

  failed(r: TraceRecord, code: string): void {
    if (r.state === 'started' || r.state === 'scheduled') r.error = code;
    this.recorder.finish(r, 'failed');
  }
}

export class FlightRecorder {
  private readonly ring: (TraceRecord | undefined)[];
  private next = 0;
  private nextId = 0;
  /** in flight, oldest first: an intrusive list, so that a long wait outlives the ring */
  private head: TraceRecord | undefined;
  private tail: TraceRecord | undefined;
  private flying = 0;
  /** this process's world rank once a process group is initialized (-1 before) */
  rank = -1;

  constructor(readonly capacity: number = DEFAULT_TRACE_BUFFER_SIZE) {
    this.ring = new Array<TraceRecord | undefined>(capacity).fill(undefined);
  }

  get enabled(): boolean {
    return this.capacity > 0;
  }

  group(pgId: number, ranks: readonly number[], rank: number, backend: string): GroupTrace {
    return new GroupTrace(this, pgId, ranks, rank, backend);
  }

  add(
    group: GroupTrace,
    seq: number,
    p2pSeq: number,
    op: string,
    algorithm: string,
    dtype: string,
    count: number,
    peer: number,
    timeoutMs: number,
    now: number,
  ): TraceRecord {
    let r = this.ring[this.next];
    if (r === undefined || r.state === 'started' || r.state === 'scheduled') {
      r = {
        recordId: 0,
        group,
        seq,
        p2pSeq,
        op,
        algorithm,
        dtype,
        count,
        peer,
        timeoutMs,
        state: 'started',
        created: now,
        started: now,
        completed: 0,
        error: undefined,
        prevInFlight: undefined,
        nextInFlight: undefined,
      };
      this.ring[this.next] = r;
    } else {
      r.group = group;
      r.seq = seq;
      r.p2pSeq = p2pSeq;
      r.op = op;
      r.algorithm = algorithm;
      r.dtype = dtype;
      r.count = count;
      r.peer = peer;
      r.timeoutMs = timeoutMs;
      r.state = 'started';
      r.created = now;
      r.started = now;
      r.completed = 0;
      r.error = undefined;
    }
    r.recordId = this.nextId++;
    this.next = this.next + 1 === this.capacity ? 0 : this.next + 1;
    // append to the in-flight list
    r.prevInFlight = this.tail;
    r.nextInFlight = undefined;
    if (this.tail) this.tail.nextInFlight = r;
    else this.head = r;
    this.tail = r;
    this.flying++;
    return r;
  }

  finish(r: TraceRecord, state: 'completed' | 'failed'): void {
    if (r.state !== 'started' && r.state !== 'scheduled') return;
    r.state = state;
    r.completed = performance.now();
    if (r.prevInFlight) r.prevInFlight.nextInFlight = r.nextInFlight;
    else this.head = r.nextInFlight;
    if (r.nextInFlight) r.nextInFlight.prevInFlight = r.prevInFlight;
    else this.tail = r.prevInFlight;
    r.prevInFlight = r.nextInFlight = undefined;
    this.flying--;
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

  /** The ops in flight, oldest first (also those the ring no longer holds). */
  inFlight(): TraceRecord[] {
    const out: TraceRecord[] = [];
    for (let r = this.head; r; r = r.nextInFlight) out.push(r);
    return out;
  }

  get inFlightCount(): number {
    return this.flying;
  }

  /** The oldest op still in flight, if any. */
  oldestInFlight(): TraceRecord | undefined {
    return this.head;
  }

  /** Ends what `groups` still have in flight (their world is destroyed): `failed` with `code`. */
  abandon(groups: readonly GroupTrace[], code: string): void {
    for (const r of this.inFlight()) {
      if (groups.includes(r.group)) {
        r.error = code;
        this.finish(r, 'failed');
      }
    }
  }

  clear(): void {
    this.ring.fill(undefined);
    this.next = 0;
    this.head = this.tail = undefined;
    this.flying = 0;
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
  if (!Number.isInteger(n) || n < 0 || n > 1_000_000)
    throw new InvalidArgumentError(`${TRACE_BUFFER_ENV} must be an integer in [0, 1000000], got ${JSON.stringify(raw)}`);
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
