// Collectives of one host's ranks over flags in shared memory, as Open MPI's coll/sm does them:
// each rank writes its input into the region of its own segment and posts the op's number; each
// rank waits for every peer's number (spinning, or sleeping on a futex where ranks share cores),
// then computes its result straight from everyone's input. No frames and no per-step scheduling;
// when the peers post within the bound there is no event-loop turn either, and the op's promise is
// settled before the call returns. Past the bound the op waits on the event loop (a peer's post
// rings this rank's doorbell) and completes the same way.
//
// Two halves of FAST_BYTES: each posted piece k (a number) uses half k & 1. A rank's part up to a
// half goes in one piece; a larger one in pieces of a half each, one number per piece, so a large
// op is a pipeline of the same step: copy a piece in, post, wait, compute that piece of the result.
// A rank posts piece k+1 only once every peer has posted k (the gate), and a peer posts k only
// once it completed k-1 (it read what it needed of k-1), so the half k+1 overwrites is free.
//
// A piece waits only for the posts it reads: a broadcast's or scatter's non-root for its root's,
// a reduce's or gather's root for everyone's, their root (or non-root) for nobody's, the others
// for everyone's. A root that sends returns as soon as its data is in (as Open MPI's coll/sm and
// eager sends do), and only its next op waits, at the gate, for the peers to have taken it. A
// signature a piece did not read (a peer it did not wait for) is checked at that gate, so a
// mismatch is still found on every rank: there it fails the next op, naming both calls.
// A failed op (a timeout) breaks that chain: a peer two numbers ahead gave the op up, so a reader
// fails the op naming it before reading its half, and checks again after reading (the peer may
// have overwritten what was read), which makes such a race an error, never a wrong result. A
// failed op still posts each of its remaining numbers (abandoned, no data), so the ranks' numbers
// stay aligned for the ops after it.
//
// From three ranks a large all-reduce goes as a reduce-scatter then an all-gather of the same
// path: a rank reduces only its block of everyone's data, a 1/size share of the arithmetic.
//
// Every other collective of the group (not one of these, or another algorithm asked for) takes a
// number too: its rank posts a marker, its signature with no data, and runs the op on the rings
// without waiting. Ranks that disagree on the path (the `algorithm` option on one rank only) then
// see each other's signatures and fail with a mismatch instead of waiting, one for data and the
// other for frames, until the timeout.
import type { CollectiveCall } from '../../backends/backend';
import { CmeshError, CollectiveMismatchError, PeerFailureError } from '../../errors';
import { finishAvg, reduceInto } from '../../reduce/kernels';
import type { ReduceOp } from '../../reduce-op';
import { DType, Tensor, dtypeOf, viewAs } from '../../tensor/dtype';
import { FrameKind, OpSignature, signaturesMatch } from '../frame';
import { describeSignature } from '../../ops/signature';
import { FrameMismatch } from '../peer-connection';
import { FAST_BYTES, F_CTRL_BYTES, F_SEQ, F_SIG } from './layout';
import type { ShmAddon } from './native';

/** The algorithm name such ops report (observers, traffic counters, the flight recorder). */
export const FAST_ALGORITHM = 'shm-flags';

/** A rank's small-collective region, mapped in this process. */
export interface FastRegion {
  bytes: Buffer;
  i32: Int32Array;
}

export interface FastOptions {
  /** How long a call spins for its peers (µs)... */
  spinUs: number;
  /** ...then yields its core to them in a loop (ranks that share cores)... */
  yieldUs?: number;
  /** ...then sleeps on the awaited peer's futex before it returns and waits on the event loop. */
  sleepUs: number;
  /** The abort a peer sent for this group's op `seq`, as the error to fail it with. */
  aborted?: (seq: number) => Error | undefined;
  /** Called around a synchronous wait: the transport stops asking peers for doorbell wake-ups. */
  holdWakeups?: () => void;
}

const SEQ = F_SEQ >> 2;
const SIG = F_SIG >> 2;
/** a signature's words, and the stride between the two halves' signatures (a cache line) */
const SIG_WORDS = 16;
type Wait = Pick<FastOptions, 'spinUs' | 'sleepUs' | 'yieldUs'>;
const NO_WAIT: Wait = { spinUs: 0, sleepUs: 0, yieldUs: 0 };
/** whose post a piece waits for (waitsFor): every peer's, or nobody's; else the root's group rank */
const ALL = -1;
const NONE = -2;
/** a op b and b op a are the same bits (min and max are not: NaN, and the signs of zero) */
const COMMUTATIVE: ReadonlySet<ReduceOp> = new Set<ReduceOp>(['sum', 'avg', 'product', 'band', 'bor', 'bxor']);
/** Set in a marker's opcode word: the op runs on the rings (opcodes fit a byte). */
const RINGS = 0x100;
/**
 * Set in the opcode word of a piece posted without data: its op failed on that rank (its timeout,
 * an earlier op's failure). The signature stays, so a peer still reads a mismatch as one.
 */
const ABANDONED = 0x200;

/** The collectives this path runs; every other one of the group takes a marker and the rings. */
const TAKEN: ReadonlySet<CollectiveCall['op']> = new Set<CollectiveCall['op']>([
  'allReduce',
  'reduce',
  'broadcast',
  'allGather',
  'gather',
  'reduceScatter',
  'scatter',
  'barrier',
]);

/** Seq words wrap: whether `a` is at or past `b`. */
const reached = (a: number, b: number) => ((a - b) | 0) >= 0;

/** From this size an all-reduce of three or more ranks goes as a reduce-scatter then an all-gather. */
export const SPLIT_BYTES = 64 * 1024;

/** Elements of a piece: a half holds `pieceElements` of each of `blocks` blocks. */
const pieceElements = (es: number, blocks = 1) => Math.max(1, Math.floor(FAST_BYTES / (es * blocks)));

/** The elements per rank the op's pieces split, and how many a piece holds. */
function geometry(call: CollectiveCall, size: number): { elements: number; per: number } {
  switch (call.op) {
    case 'allReduce':
    case 'reduce':
    case 'broadcast':
      return { elements: call.tensor.length, per: pieceElements(call.tensor.BYTES_PER_ELEMENT) };
    case 'allGather':
    case 'gather':
      return { elements: call.input.length, per: pieceElements(call.input.BYTES_PER_ELEMENT) };
    case 'reduceScatter':
    case 'scatter':
      return { elements: call.output.length, per: pieceElements(call.output.BYTES_PER_ELEMENT, size) };
    default:
      return { elements: 0, per: 1 };
  }
}

/** The promise of every op that completed before anybody asked for it (most small ones). */
const DONE = Promise.resolve();
const ignore = () => {};

class FastOp {
  /** piece `k` is posted */
  posted = false;
  settled = false;
  /** completed (its promise resolved) */
  ok = false;
  /** failed: its pieces not posted yet go abandoned (no data) in its turn, and it waits for nothing */
  abandoned = false;
  bytesSent = 0;
  bytesReceived = 0;
  /** a split all-reduce's halves: the all-gather this op's failure fails, the reduce-scatter this op waits on */
  chained?: FastOp;
  dependsOn?: FastOp;
  /** made when first asked for: an op that completes inside the call never needs one of its own */
  private promise?: Promise<void>;
  private resolvePromise?: () => void;
  private rejectPromise?: (err: unknown) => void;
  private error?: { err: unknown };

  /** the number of the piece in flight (the first until it completes) */
  k: number;
  /** the last piece's number */
  readonly last: number;

  constructor(
    readonly first: number,
    /** how many pieces (numbers) the op takes */
    readonly pieces: number,
    /** elements per piece (of each block, for reduceScatter) */
    readonly per: number,
    /** undefined: a marker (the op runs on the rings) */
    readonly call: CollectiveCall | undefined,
    readonly sig: OpSignature,
    readonly seq: number,
  ) {
    this.k = first;
    this.last = first + pieces - 1;
  }

  get done(): Promise<void> {
    if (this.promise) return this.promise;
    if (this.ok) return (this.promise = DONE);
    if (this.error) this.promise = Promise.reject(this.error.err);
    else
      this.promise = new Promise<void>((resolve, reject) => {
        this.resolvePromise = resolve;
        this.rejectPromise = reject;
      });
    this.promise.catch(ignore); // reported through the group's promise
    return this.promise;
  }

  resolve(): void {
    this.resolvePromise?.();
  }

  reject(err: unknown): void {
    this.error = { err };
    this.rejectPromise?.(err);
  }
}

/** Typed views of one half of a region, made on first use per dtype (no allocation per op). */
type Views = Partial<Record<DType, Tensor>>;

export class FastGroup {
  /** [group rank][half]: typed views of that half's data */
  private readonly views: Views[][];
  /** [group rank][half]: the last part of that half read (slice) */
  private readonly sliced: { dtype?: DType; at: number; view?: Tensor }[][];
  /** number of the last op issued (ops are numbered from 1; the regions start at 0) */
  private issued = 0;
  /** the op posted and waiting for its peers */
  private current?: FastOp;
  private readonly queue: FastOp[] = [];
  private failed?: Error;
  /** world ranks whose connection is gone, with the error */
  private readonly gone = new Map<number, Error>();
  /** every peer has posted this number (the gate for the next is open) */
  private seenAll = 0;
  /**
   * The last piece completed without reading every peer's signature (`pending`), checked at the
   * next gate; one object, rewritten per such piece (no allocation per op).
   */
  private readonly unchecked = { pending: false, k: 0, sig: undefined as OpSignature | undefined, seq: 0, read: NONE };

  constructor(
    private readonly addon: ShmAddon,
    private readonly handle: object,
    /** every member's region, in group-rank order */
    private readonly regions: readonly FastRegion[],
    /** this rank's group rank */
    private readonly me: number,
    private readonly worldRanks: readonly number[],
    private readonly opts: FastOptions,
  ) {
    this.views = regions.map(() => [{}, {}]);
    this.sliced = regions.map(() => [{ at: 0 }, { at: 0 }]);
  }

  get size(): number {
    return this.regions.length;
  }

  /** Whether `call` goes this way: one of the collectives below (of any size: a large one in pieces). */
  accepts(call: CollectiveCall): boolean {
    return TAKEN.has(call.op);
  }

  /** Starts `call` (already accepted); its promise is settled already when the peers were there in time. */
  run(call: CollectiveCall, seq: number, sig: OpSignature): FastOp {
    // a marker before it may be complete already: then this op posts at once
    if (this.current && !this.current.call) this.poll();
    if (call.op === 'allReduce' && this.splits(call.tensor)) return this.runSplit(call.tensor, call.redOp, seq, sig);
    return this.start(this.numbered(call, seq, sig));
  }

  /** An op for `call` holding the next numbers, one per piece. */
  private numbered(call: CollectiveCall, seq: number, sig: OpSignature): FastOp {
    const { elements, per } = geometry(call, this.size);
    const pieces = Math.max(1, Math.ceil(elements / per));
    const op = new FastOp(this.issued + 1, pieces, per, call, sig, seq);
    this.issued += pieces;
    return op;
  }

  /**
   * Whether an all-reduce of `t` goes as a reduce-scatter then an all-gather: from three ranks on
   * and SPLIT_BYTES, when its elements divide into equal blocks. Each rank then reduces only its
   * block of every peer's data (its share of the arithmetic, and 1/size of the reads) and the
   * others copy the reduced blocks, instead of every rank reducing all of everyone's data.
   */
  private splits(t: Tensor): boolean {
    return this.size > 2 && t.byteLength >= SPLIT_BYTES && t.length % this.size === 0;
  }

  /**
   * The all-reduce as its two halves, both under the all-reduce's signature (a peer that called
   * something else still reads as a mismatch); the second is the op the caller holds, and the
   * first's failure fails it.
   */
  private runSplit(t: Tensor, redOp: ReduceOp, seq: number, sig: OpSignature): FastOp {
    const m = t.length / this.size;
    const block = (b: number) => t.subarray(b * m, (b + 1) * m) as Tensor;
    const outputs = Array.from({ length: this.size }, (_, b) => block(b));
    const scatter = this.numbered({ op: 'reduceScatter', input: t, output: outputs[this.me], redOp }, seq, sig);
    const gather = this.numbered({ op: 'allGather', input: outputs[this.me], outputs }, seq, sig);
    scatter.chained = gather;
    gather.dependsOn = scatter;
    this.start(scatter);
    return this.start(gather);
  }

  /**
   * Numbers a collective of the group that runs on the rings: posts its signature in turn, and
   * the returned op fails if a peer posted something else for that number (its settling is all it
   * does; the caller waits for nothing).
   */
  mark(seq: number, sig: OpSignature): FastOp {
    return this.start(new FastOp(++this.issued, 1, 1, undefined, sig, seq));
  }

  private start(op: FastOp): FastOp {
    if (this.failed) {
      op.settled = true;
      op.reject(this.failed);
      return op;
    }
    this.queue.push(op);
    if (!this.current) this.next(true);
    return op;
  }

  /** World ranks op `op` still waits for. */
  awaited(op: FastOp): number[] {
    if (op.dependsOn && !op.dependsOn.ok) return this.awaited(op.dependsOn);
    const behind = (k: number, only = ALL) =>
      this.worldRanks.filter((_, r) => r !== this.me && (only === ALL || r === only) && !reached(Atomics.load(this.regions[r].i32, SEQ), k));
    // in flight and not posted: held at the gate by the peers that have not posted the number before
    if (!op.posted) return this.current === op ? behind(op.k - 1) : this.worldRanks.filter((_, r) => r !== this.me);
    return behind(op.k, this.waitsFor(op));
  }

  /** Whose post of its piece `op` reads: every peer's (ALL), nobody's (NONE), or the root's. */
  private waitsFor(op: FastOp): number {
    const call = op.call;
    if (!call || op.abandoned) return ALL;
    switch (call.op) {
      case 'broadcast':
      case 'scatter':
        return call.root === this.me ? NONE : call.root;
      case 'reduce':
      case 'gather':
        return call.root === this.me ? ALL : NONE;
      default:
        return ALL;
    }
  }

  /** The op failed (timeout, peer failure): it stops waiting; one not posted yet posts a marker in its turn. */
  cancel(op: FastOp): void {
    if (op.settled) return;
    op.settled = true;
    if (this.current === op) {
      this.current = undefined;
      this.abandonRest(op);
      this.next(false);
    } else op.abandoned = true;
    if (op.dependsOn) this.cancel(op.dependsOn);
  }

  /** Posts the pieces of a failed op after the one in flight, abandoned: the numbers stay aligned. */
  private abandonRest(op: FastOp): void {
    op.abandoned = true;
    // its piece not posted yet (held at the gate, or failed before its turn) goes too, without waiting
    if (!op.posted) this.post(op);
    while (op.k !== op.last) {
      op.k++;
      this.post(op);
    }
  }

  /** Looks whether the op in flight can finish (the event loop's doorbell and busy-polling call this). */
  poll(): void {
    const op = this.current;
    if (!op) return;
    const aborted = this.opts.aborted?.(op.seq);
    if (aborted) return this.fail(op, aborted);
    this.advance(op, NO_WAIT);
  }

  /**
   * The op in flight waits for a peer whose connection is gone: it fails naming it. A gone peer
   * that posted what the op reads is no obstacle: its part stays in its segment, which this
   * process still maps (a root that broadcast and then left, as with an eager send).
   */
  private failIfGone(op: FastOp): void {
    if (!this.gone.size) return;
    const r = this.awaited(op).find((w) => this.gone.has(w));
    if (r !== undefined) this.fail(op, this.gone.get(r)!);
  }

  /** A peer's connection is gone: the ops waiting for it fail naming it. */
  peerGone(worldRank: number, err: Error): void {
    this.gone.set(worldRank, err);
    const op = this.current;
    if (op && this.awaited(op).includes(worldRank)) this.fail(op, err);
  }

  /** The transport is closing: everything in flight and everything later fails with `err`. */
  close(err: Error): void {
    this.failed ??= err;
    const ops = [...(this.current ? [this.current] : []), ...this.queue.splice(0)];
    this.current = undefined;
    for (const op of ops) {
      if (op.settled) continue;
      op.settled = true;
      op.reject(err);
    }
  }

  /** Posts the queued ops in order; waits for the first one that is not abandoned. */
  private next(wait: boolean): void {
    while (!this.current && this.queue.length && !this.failed) {
      const op = this.queue.shift()!;
      if (op.abandoned) {
        this.abandonRest(op);
        continue;
      }
      this.current = op;
      this.advance(op, wait && op.call ? this.opts : NO_WAIT);
      // not done: poll() goes on once the peers have posted
    }
  }

  /**
   * Takes the op in flight as far as its peers allow: posts its piece once the gate is open, and
   * completes the piece once the peers it reads have posted it; then the next piece, waiting for
   * it inside the call as `opts` allow. Returns with the op still in flight when a peer is not
   * there yet.
   */
  private advance(op: FastOp, w: Wait): void {
    for (;;) {
      if (!op.posted) {
        if (!reached(this.seenAll, op.k - 1)) {
          if (!this.waitFor(op.k - 1, ALL, w)) return this.failIfGone(op);
          this.seenAll = op.k - 1;
        }
        if (this.unchecked.pending && !this.checkUnread(op)) return;
        this.post(op);
      }
      const only = this.waitsFor(op);
      if (only !== NONE) {
        if (!this.waitFor(op.k, only, w)) return this.failIfGone(op);
        if (only === ALL) this.seenAll = op.k;
      }
      if (!this.completePiece(op, only)) return;
      if (op.k === op.last) break;
      op.k++;
      op.posted = false;
      w = this.opts;
    }
    this.current = undefined;
    if (op.chained) {
      op.chained.bytesSent += op.bytesSent;
      op.chained.bytesReceived += op.bytesReceived;
    }
    if (!op.settled) {
      op.settled = true;
      op.ok = true;
      op.resolve();
    }
    if (this.queue.length) this.next(false);
  }

  /**
   * Waits inside the call, as `w` allows, until every peer (or group rank `only`) has posted
   * number `k`; false when one has not.
   */
  private waitFor(k: number, only: number, w: Wait): boolean {
    const peer = only === ALL ? -1 : only < this.me ? only : only - 1;
    const yieldUs = w.yieldUs ?? 0;
    // also when the peers are there already: until the loop turns, they need not ring this rank
    if (w.spinUs + w.sleepUs + yieldUs > 0) this.opts.holdWakeups?.();
    return this.addon.fastWait(this.handle, k, w.spinUs, w.sleepUs, yieldUs, peer) === -1;
  }

  /**
   * At the gate of `op` (every peer has posted the number before it): the signatures the last
   * piece did not read, checked now. A peer's half of that number is intact until this rank posts
   * (the peer's next-but-one number needs this rank's post). A mismatch fails `op`.
   */
  private checkUnread(op: FastOp): boolean {
    const u = this.unchecked;
    u.pending = false;
    if (u.k !== op.k - 1) return true;
    const s = SIG + (u.k & 1) * SIG_WORDS;
    try {
      for (let r = 0; r < this.size; r++) {
        if (r === this.me || r === u.read) continue;
        const i32 = this.regions[r].i32;
        // a peer that gave that op up (it failed there) or is past it told its own caller
        if (i32[s] & ABANDONED || reached(Atomics.load(i32, SEQ), u.k + 2)) continue;
        this.checkPeer(r, s, u.k, u.sig!, true, u.seq);
      }
    } catch (e) {
      const err =
        e instanceof FrameMismatch
          ? new CollectiveMismatchError(
              `collective mismatch in the op before this one: rank ${e.peer} called ${describeSignature(e.theirs)} but rank ${this.worldRanks[this.me]} called ${describeSignature(e.ours)} (found as this op began: that op read nothing of rank ${e.peer}'s)`,
              { peers: [e.peer] },
            )
          : e;
      this.fail(op, err);
      return false;
    }
    return true;
  }

  /** The range of elements piece `op.k` covers: [from, from + n). */
  private range(op: FastOp, elements: number): { from: number; n: number } {
    const from = (op.k - op.first) * op.per;
    return { from, n: Math.max(0, Math.min(op.per, elements - from)) };
  }

  private post(op: FastOp): void {
    const half = op.k & 1;
    const call = op.call;
    if (call && !op.abandoned) {
      switch (call.op) {
        case 'allReduce':
        case 'reduce':
          op.bytesSent += this.put(half, this.piece(op, call.tensor), 0);
          break;
        case 'broadcast':
          if (call.root === this.me) op.bytesSent += this.put(half, this.piece(op, call.tensor), 0);
          break;
        case 'allGather':
        case 'gather':
          op.bytesSent += this.put(half, this.piece(op, call.input), 0);
          break;
        case 'scatter':
          if (call.root === this.me)
            op.bytesSent += this.putBlocks(op, half, call.output.length, (b, from, n) => call.inputs![b].subarray(from, from + n) as Tensor);
          break;
        case 'reduceScatter': {
          const m = call.output.length;
          const list = Array.isArray(call.input) ? (call.input as readonly Tensor[]) : undefined;
          const flat = call.input as Tensor;
          // in one piece, a flat input's blocks lie in the half as they lie in the input
          if (!list && op.pieces === 1) {
            op.bytesSent += this.put(half, flat, 0);
            break;
          }
          op.bytesSent += this.putBlocks(
            op,
            half,
            m,
            (b, from, n) => (list ? list[b].subarray(from, from + n) : flat.subarray(b * m + from, b * m + from + n)) as Tensor,
          );
          break;
        }
      }
    }
    const i32 = this.regions[this.me].i32;
    const s = SIG + half * SIG_WORDS;
    i32[s] = op.sig.opcode | (call ? 0 : RINGS) | (op.abandoned ? ABANDONED : 0);
    i32[s + 1] = op.sig.dtype;
    i32[s + 2] = op.sig.root;
    i32[s + 3] = op.sig.count | 0;
    op.posted = true;
    this.addon.fastPost(this.handle, op.k);
  }

  /**
   * Block b (rank b's share, `m` elements each): this piece's elements of it, at b * n in the
   * half, for every rank b; returns the bytes copied.
   */
  private putBlocks(op: FastOp, half: number, m: number, block: (b: number, from: number, n: number) => Tensor): number {
    const { from, n } = this.range(op, m);
    let bytes = 0;
    for (let b = 0; b < this.size; b++) bytes += this.put(half, block(b, from, n), b * n);
    return bytes;
  }

  /** This piece's elements of `t`. */
  private piece(op: FastOp, t: Tensor): Tensor {
    if (op.pieces === 1) return t;
    const { from, n } = this.range(op, t.length);
    return t.subarray(from, from + n) as Tensor;
  }

  /** Copies `t` into this rank's half from element `at`; returns the bytes copied. */
  private put(half: number, t: Tensor, at: number): number {
    this.typed(this.me, half, dtypeOf(t)).set(t as never, at);
    return t.byteLength;
  }

  /** The whole data half of rank `r` as `dtype` (made once per dtype: no allocation per op). */
  private typed(r: number, half: number, dtype: DType): Tensor {
    const v = this.views[r][half];
    return (v[dtype] ??= viewAs(this.regions[r].bytes.subarray(F_CTRL_BYTES + half * FAST_BYTES, F_CTRL_BYTES + (half + 1) * FAST_BYTES), dtype));
  }

  /**
   * Elements [at, at + n) of rank `r`'s half as `dtype`: the last such view of that half is kept,
   * so a run of ops of one shape makes no view per op.
   */
  private slice(r: number, half: number, dtype: DType, at: number, n: number): Tensor {
    const c = this.sliced[r][half];
    if (c.view === undefined || c.dtype !== dtype || c.at !== at || c.view.length !== n) {
      c.view = this.typed(r, half, dtype).subarray(at, at + n) as Tensor;
      c.dtype = dtype;
      c.at = at;
    }
    return c.view;
  }

  private fail(op: FastOp, err: unknown): void {
    if (this.current === op) this.current = undefined;
    this.abandonRest(op);
    if (!op.settled) {
      op.settled = true;
      op.reject(err);
    }
    const chained = op.chained;
    if (chained && !chained.settled) {
      chained.settled = true;
      chained.abandoned = true;
      chained.reject(err);
    }
    this.next(false);
  }

  /** Checks and computes piece `op.k`, having waited for the posts of `only`; false when the op failed. */
  private completePiece(op: FastOp, only: number): boolean {
    const half = op.k & 1;
    const s = SIG + half * SIG_WORDS;
    try {
      // the peers read: all but this rank, or the one waited for (none when NONE)
      const from = only === ALL ? 0 : Math.max(0, only);
      const to = only === ALL ? this.size : only === NONE ? 0 : only + 1;
      for (let r = from; r < to; r++) if (r !== this.me) this.checkPeer(r, s, op.k, op.sig, !!op.call, op.seq);
      if (op.call) this.result(op, half);
      for (let r = from; r < to; r++) {
        if (r !== this.me && reached(Atomics.load(this.regions[r].i32, SEQ), op.k + 2)) {
          throw new CmeshError(
            `rank ${this.worldRanks[r]} went on two ops while this rank read op ${op.seq}'s data (after a failed op); the result is not used`,
            {
              peers: [this.worldRanks[r]],
            },
          );
        }
      }
      if (only !== ALL) {
        const u = this.unchecked;
        u.pending = true;
        u.k = op.k;
        u.sig = op.sig;
        u.seq = op.seq;
        u.read = only;
      }
    } catch (e) {
      this.fail(op, e);
      return false;
    }
    return true;
  }

  /** Throws unless peer `r` posted `ours` for number `k` (signature word `s`): a mismatch, or it gave up. */
  private checkPeer(r: number, s: number, k: number, ours: OpSignature, flags: boolean, seq: number): void {
    const i32 = this.regions[r].i32;
    // two numbers ahead: it posted this op's pieces without waiting (it failed there); the
    // half holds one of them (abandoned: read as below) or a later op's
    const ahead = reached(Atomics.load(i32, SEQ), k + 2);
    const word = i32[s];
    if (ahead && !(word & ABANDONED)) throw this.gaveUp(r);
    if (flags && word === ours.opcode && i32[s + 1] === ours.dtype && i32[s + 2] === ours.root && i32[s + 3] === (ours.count | 0)) return;
    const theirs = {
      opcode: word & ~(RINGS | ABANDONED),
      dtype: i32[s + 1],
      root: i32[s + 2],
      count: i32[s + 3] >>> 0,
      kind: FrameKind.Collective,
      group: 0,
      tag: seq,
      length: 0,
    };
    if (word & ABANDONED) {
      if (!signaturesMatch(theirs, ours)) throw new FrameMismatch(this.worldRanks[r], theirs, ours, 0);
      throw this.gaveUp(r);
    }
    const sameWay = !(word & RINGS) === flags;
    if (sameWay && !flags && signaturesMatch(theirs, ours)) return;
    if (sameWay || !signaturesMatch(theirs, ours)) throw new FrameMismatch(this.worldRanks[r], theirs, ours, 0);
    const where = (f: boolean) => (f ? `in one step over shared memory (${FAST_ALGORITHM})` : 'on the rings');
    throw new CollectiveMismatchError(
      `collective mismatch: rank ${this.worldRanks[r]} runs ${describeSignature(ours)} ${where(!flags)} and rank ${this.worldRanks[this.me]} ${where(flags)}: ` +
        'the ranks passed different `algorithm` options (or CMESH_ALGO)',
      { peers: [this.worldRanks[r]] },
    );
  }

  private gaveUp(r: number): PeerFailureError {
    return new PeerFailureError(`rank ${this.worldRanks[r]} gave up this op (it failed there: its timeout, or an earlier op's failure)`, {
      peers: [this.worldRanks[r]],
    });
  }

  /**
   * out = every rank's elements [at, at + out.length) reduced in rank order (the same on every
   * rank). `holdsOwn`: out holds this rank's part already (an in-place reduction).
   */
  private reduceAll(out: Tensor, half: number, at: number, op: ReduceOp, holdsOwn: boolean): number {
    const dtype = dtypeOf(out);
    const n = out.length;
    const peer = (r: number) => this.slice(r, half, dtype, at, n);
    if (holdsOwn && this.size === 2 && COMMUTATIVE.has(op)) {
      // a op b and b op a are the same bits for these: one pass instead of a copy and a pass
      reduceInto(out, peer(1 - this.me), op);
    } else {
      if (!(holdsOwn && this.me === 0)) out.set(peer(0) as never);
      for (let r = 1; r < this.size; r++) reduceInto(out, peer(r), op);
    }
    if (op === 'avg' && n) finishAvg(out, this.size);
    return out.byteLength * (this.size - 1);
  }

  private result(op: FastOp, half: number): void {
    const call = op.call!;
    switch (call.op) {
      case 'allReduce':
        op.bytesReceived += this.reduceAll(this.piece(op, call.tensor), half, 0, call.redOp, true);
        return;
      case 'reduce':
        if (call.root === this.me) op.bytesReceived += this.reduceAll(this.piece(op, call.tensor), half, 0, call.redOp, true);
        return;
      case 'broadcast':
        if (call.root !== this.me) {
          const t = this.piece(op, call.tensor);
          t.set(this.slice(call.root, half, dtypeOf(t), 0, t.length) as never);
          op.bytesReceived += t.byteLength;
        }
        return;
      case 'allGather': {
        const { from, n } = this.range(op, call.input.length);
        const dtype = dtypeOf(call.input);
        for (let r = 0; r < this.size; r++) call.outputs[r].set(this.slice(r, half, dtype, 0, n) as never, from);
        op.bytesReceived += n * call.input.BYTES_PER_ELEMENT * (this.size - 1);
        return;
      }
      case 'gather':
        if (call.root === this.me) {
          const { from, n } = this.range(op, call.input.length);
          const dtype = dtypeOf(call.input);
          for (let r = 0; r < this.size; r++) call.outputs![r].set(this.slice(r, half, dtype, 0, n) as never, from);
          op.bytesReceived += n * call.input.BYTES_PER_ELEMENT * (this.size - 1);
        }
        return;
      case 'reduceScatter': {
        const { from, n } = this.range(op, call.output.length);
        const out = op.pieces === 1 ? call.output : (call.output.subarray(from, from + n) as Tensor);
        op.bytesReceived += this.reduceAll(out, half, this.me * n, call.redOp, false);
        return;
      }
      case 'scatter': {
        const { from, n } = this.range(op, call.output.length);
        call.output.set(this.slice(call.root, half, dtypeOf(call.output), this.me * n, n) as never, from);
        if (call.root !== this.me) op.bytesReceived += n * call.output.BYTES_PER_ELEMENT;
        return;
      }
      case 'barrier':
        return;
    }
  }
}

export type { FastOp };
