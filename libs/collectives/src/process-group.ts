// A process group: torch.distributed's ProcessGroup for Node, over a Backend (backends/: tcp, the
// CPU data plane; nccl, the GPU sidecar). Validates every call, against the backend's
// capabilities too, before it takes a sequence number; runs the op's timeout; and reports each op
// to the traffic counters and observers with a typed error naming op, group, seq, rank and peers.
import type { AlgorithmName } from './algorithms';
import type { Backend, BackendKind, BackendOp, CollectiveCall } from './backends/backend';
import { checkAlgorithmOption, checkCollective, checkEvenBlocks, checkP2P } from './backends/capabilities';
import { DistTimeoutError, ErrorContext, InvalidArgumentError, NotInitializedError, describeContext } from './errors';
import { hasCollectiveObservers, notifyCollective } from './observers';
import type { Collective } from './ops/names';
import { signature } from './ops/signature';
import { sameDtype, sameLength, splitSizes, tensorArg, tensorList, timeoutArg } from './ops/validate';
import { ReduceOp, validateReduceOp } from './reduce-op';
import { DTYPES, DType, Tensor, dtypeOf, elementSize } from './tensor/dtype';
import type { GroupTrace, TraceRecord } from './trace/recorder';
import type { WorldTrace } from './trace/world-trace';
import { TrafficCounter, TrafficCounters } from './traffic';
import { timerMs } from './timer';
import { ANY_COUNT, OpSignature } from './transport/frame';

export const DEFAULT_TIMEOUT_MS = 30 * 60 * 1000;

export interface OpOptions {
  timeout?: number;
}
export interface RootOptions<C extends Collective = Collective> extends OpOptions {
  /** force one of the collective's algorithms instead of the cost model's choice */
  algorithm?: AlgorithmName<C>;
}

export class ProcessGroup {
  /** This process's rank in the group. */
  readonly rank: number;
  readonly size: number;
  /** The backend's name, as getBackend() returns it. */
  readonly backend: BackendKind;
  readonly traffic = new TrafficCounter();
  private seq = 0;
  private destroyed = false;
  /** this group's part of the flight recorder (undefined when it is off) */
  private readonly trace: GroupTrace | undefined;

  constructor(
    readonly id: number,
    /** Group rank -> world rank (sorted, like torch). */
    readonly worldRanks: readonly number[],
    /** This process's world rank. */
    private readonly worldRank: number,
    /** What moves the data. */
    private readonly impl: Backend,
    public timeoutMs: number = DEFAULT_TIMEOUT_MS,
    /** the world's flight recorder: records each op, dumps on failure, explains timeouts */
    private readonly worldTrace?: WorldTrace,
  ) {
    this.rank = worldRanks.indexOf(worldRank);
    this.size = worldRanks.length;
    this.backend = impl.name;
    this.trace = worldTrace?.group(id, worldRanks, impl.name);
  }

  get name(): string {
    return String(this.id);
  }

  /** What print(group) shows, like torch's <...ProcessGroup object at 0x...>. */
  toString(): string {
    return `<cmesh ProcessGroup ${this.id} backend=${this.backend} ranks=[${this.worldRanks.join(', ')}]>`;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString();
  }

  /** Group rank of a world rank, -1 when it is not a member. */
  groupRank(worldRank: number): number {
    return this.worldRanks.indexOf(worldRank);
  }

  /** Marks the group destroyed and releases what its backend holds (an NCCL communicator). */
  async destroy(): Promise<void> {
    this.destroyed = true;
    await this.impl.close();
  }

  get isDestroyed(): boolean {
    return this.destroyed;
  }

  // ---- point to point (ranks are world ranks, like torch) ----

  send(tensor: Tensor, dst: number, tag = 0, opts: OpOptions = {}): Promise<void> {
    const t = this.checkP2P('send', tensor, tag, opts);
    this.memberRank('send', dst, 'dst');
    if (dst === this.worldRank) throw new InvalidArgumentError(`send: dst ${dst} is this rank; sending to yourself is not allowed`, { op: 'send' });
    checkP2P(this.backend, this.impl.capabilities, 'send', dtypeOf(t), false);
    return this.p2p('send', tag, opts.timeout, t, dst, (ms) => this.impl.send(t, dst, tag, ms));
  }

  /** Receives into `tensor`; src undefined = from any member. Resolves with the sender's world rank. */
  recv(tensor: Tensor, src: number | undefined, tag = 0, opts: OpOptions = {}): Promise<number> {
    const t = this.checkP2P('recv', tensor, tag, opts);
    if (src !== undefined) {
      this.memberRank('recv', src, 'src');
      if (src === this.worldRank) throw new InvalidArgumentError(`recv: src ${src} is this rank`, { op: 'recv' });
    }
    checkP2P(this.backend, this.impl.capabilities, 'recv', dtypeOf(t), src === undefined);
    return this.p2p('recv', tag, opts.timeout, t, src, (ms) => this.impl.recv(t, src, tag, ms));
  }

  // ---- collectives ----

  broadcast(tensor: Tensor, src: number, opts: RootOptions<'broadcast'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'broadcast');
    const root = this.memberRank('broadcast', src, 'src');
    return this.collective('broadcast', opts, t.byteLength, signature('broadcast', dtypeOf(t), t.length, src), { op: 'broadcast', tensor: t, root });
  }

  reduce(tensor: Tensor, dst: number, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduce'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'reduce');
    validateReduceOp(op, dtypeOf(t));
    const root = this.memberRank('reduce', dst, 'dst');
    return this.collective('reduce', opts, t.byteLength, signature('reduce', dtypeOf(t), t.length, dst), { op: 'reduce', tensor: t, redOp: op, root }, op);
  }

  allReduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'allReduce'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'allReduce');
    validateReduceOp(op, dtypeOf(t));
    return this.collective('allReduce', opts, t.byteLength, signature('allReduce', dtypeOf(t), t.length), { op: 'allReduce', tensor: t, redOp: op }, op);
  }

  gather(tensor: Tensor, gatherList: Tensor[] | undefined, dst: number, opts: RootOptions<'gather'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'gather');
    const root = this.memberRank('gather', dst, 'dst');
    let outputs: Tensor[] | undefined;
    if (this.rank === root) {
      outputs = tensorList(gatherList, this.size, 'gatherList', 'gather', t, t.length);
    } else if (gatherList !== undefined && gatherList.length) {
      throw new InvalidArgumentError('gather: gatherList must NOT be specified on non-destination ranks', { op: 'gather' });
    }
    return this.collective('gather', opts, t.byteLength * this.size, signature('gather', dtypeOf(t), t.length, dst), { op: 'gather', input: t, outputs, root });
  }

  scatter(tensor: Tensor, scatterList: Tensor[] | undefined, src: number, opts: RootOptions<'scatter'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'scatter');
    const root = this.memberRank('scatter', src, 'src');
    let inputs: Tensor[] | undefined;
    if (this.rank === root) {
      inputs = tensorList(scatterList, this.size, 'scatterList', 'scatter', t, t.length);
    } else if (scatterList !== undefined && scatterList.length) {
      throw new InvalidArgumentError('scatter: scatterList must NOT be specified on non-source ranks', { op: 'scatter' });
    }
    return this.collective('scatter', opts, t.byteLength * this.size, signature('scatter', dtypeOf(t), t.length, src), {
      op: 'scatter',
      output: t,
      inputs,
      root,
    });
  }

  allGather(tensorList_: Tensor[], tensor: Tensor, opts: RootOptions<'allGather'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'allGather');
    const outputs = tensorList(tensorList_, this.size, 'tensorList', 'allGather', t, t.length);
    return this.collective('allGather', opts, t.byteLength * this.size, signature('allGather', dtypeOf(t), t.length), { op: 'allGather', input: t, outputs });
  }

  allGatherIntoTensor(output: Tensor, input: Tensor, opts: RootOptions<'allGather'> = {}): Promise<void> {
    const inp = tensorArg(input, 'input', 'allGatherIntoTensor');
    const out = tensorArg(output, 'output', 'allGatherIntoTensor');
    sameDtype(out, dtypeOf(inp), 'output', 'allGatherIntoTensor');
    sameLength(out, inp.length * this.size, 'output (input length x group size)', 'allGatherIntoTensor');
    const n = inp.length;
    const outputs = new Array<Tensor>(this.size);
    for (let i = 0; i < this.size; i++) outputs[i] = out.subarray(i * n, (i + 1) * n) as Tensor;
    return this.collective('allGather', opts, out.byteLength, signature('allGather', dtypeOf(inp), n), { op: 'allGather', input: inp, outputs });
  }

  reduceScatter(output: Tensor, inputList: Tensor[], op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduceScatter'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'reduceScatter');
    validateReduceOp(op, dtypeOf(out));
    const list = tensorList(inputList, this.size, 'inputList', 'reduceScatter', out, out.length);
    return this.collective(
      'reduceScatter',
      opts,
      out.byteLength * this.size,
      signature('reduceScatter', dtypeOf(out), out.length),
      { op: 'reduceScatter', input: list, output: out, redOp: op },
      op,
    );
  }

  reduceScatterTensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduceScatter'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'reduceScatterTensor');
    const inp = tensorArg(input, 'input', 'reduceScatterTensor');
    sameDtype(inp, dtypeOf(out), 'input', 'reduceScatterTensor');
    validateReduceOp(op, dtypeOf(out));
    sameLength(inp, out.length * this.size, 'input (output length x group size)', 'reduceScatterTensor');
    return this.collective(
      'reduceScatter',
      opts,
      inp.byteLength,
      signature('reduceScatter', dtypeOf(out), out.length),
      { op: 'reduceScatter', input: inp, output: out, redOp: op },
      op,
    );
  }

  allToAll(outputList: Tensor[], inputList: Tensor[], opts: RootOptions<'allToAll'> = {}): Promise<void> {
    if (!Array.isArray(inputList) || !inputList.length)
      throw new InvalidArgumentError('allToAll: inputList must be a non-empty array of tensors', { op: 'allToAll' });
    const first = tensorArg(inputList[0], 'inputList[0]', 'allToAll');
    const inputs = tensorList(inputList, this.size, 'inputList', 'allToAll', first);
    const outputs = tensorList(outputList, this.size, 'outputList', 'allToAll', first);
    if (!this.impl.capabilities.unevenAllToAll)
      checkEvenBlocks(
        this.backend,
        this.impl.capabilities,
        'allToAll',
        [...inputs, ...outputs].map((x) => x.length),
      );
    const bytes = inputs.reduce((a, x) => a + x.byteLength, 0);
    return this.collective('allToAll', opts, bytes, signature('allToAll', dtypeOf(first), undefined), { op: 'allToAll', inputs, outputs });
  }

  allToAllSingle(output: Tensor, input: Tensor, outputSplitSizes?: number[], inputSplitSizes?: number[], opts: RootOptions<'allToAll'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'allToAllSingle');
    const inp = tensorArg(input, 'input', 'allToAllSingle');
    sameDtype(out, dtypeOf(inp), 'output', 'allToAllSingle');
    const inSplits = splitSizes(inputSplitSizes, this.size, inp.length, 'inputSplitSizes', 'allToAllSingle');
    const outSplits = splitSizes(outputSplitSizes, this.size, out.length, 'outputSplitSizes', 'allToAllSingle');
    if (!this.impl.capabilities.unevenAllToAll) checkEvenBlocks(this.backend, this.impl.capabilities, 'allToAllSingle', [...inSplits, ...outSplits]);
    const blocks = (t: Tensor, splits: number[]) => {
      let off = 0;
      return splits.map((n) => t.subarray(off, (off += n)) as Tensor);
    };
    const call: CollectiveCall = { op: 'allToAll', inputs: blocks(inp, inSplits), outputs: blocks(out, outSplits) };
    return this.collective('allToAll', opts, inp.byteLength, signature('allToAll', dtypeOf(inp), undefined), call);
  }

  barrier(opts: OpOptions = {}): Promise<void> {
    return this.collective('barrier', opts, 0, signature('barrier', undefined, undefined), { op: 'barrier' });
  }

  trafficCounters(): TrafficCounters {
    return this.traffic.snapshot();
  }

  // ---- machinery ----

  private checkAlive(op: string): void {
    if (this.destroyed) throw new NotInitializedError(`${op}: process group ${this.name} has been destroyed`, { op, group: this.name });
  }

  private checkP2P(op: string, tensor: Tensor, tag: number, opts: OpOptions): Tensor {
    this.checkAlive(op);
    timeoutArg(opts.timeout, op);
    if (!Number.isInteger(tag) || tag < 0 || tag > 0xffffffff)
      throw new InvalidArgumentError(`${op}: tag must be a non-negative 32-bit integer, got ${tag}`, { op });
    return tensorArg(tensor, 'tensor', op);
  }

  /** Checks a world rank belongs to the group and returns its group rank. */
  private memberRank(op: string, worldRank: unknown, what: string): number {
    if (typeof worldRank !== 'number' || !Number.isInteger(worldRank)) {
      throw new InvalidArgumentError(`${op}: ${what} must be an integer rank, got ${String(worldRank)}`, { op, group: this.name });
    }
    const g = this.groupRank(worldRank);
    if (g < 0) {
      throw new InvalidArgumentError(`${op}: ${what} rank ${worldRank} is not in group ${this.name} (ranks [${this.worldRanks.join(', ')}])`, {
        op,
        group: this.name,
      });
    }
    return g;
  }

  private collective<C extends Collective>(
    op: C,
    opts: RootOptions<C>,
    bytes: number,
    sig: OpSignature,
    call: CollectiveCall,
    redOp?: ReduceOp,
  ): Promise<void> {
    this.checkAlive(op);
    timeoutArg(opts.timeout, op);
    const dtype: DType | undefined = sig.dtype ? DTYPES[sig.dtype - 1] : undefined;
    const impl = this.impl;
    checkCollective(this.backend, impl.capabilities, op, dtype, redOp);
    checkAlgorithmOption(this.backend, impl.capabilities, op, opts.algorithm);
    const algorithm = impl.plan(call, bytes, opts.algorithm);
    const seq = this.seq++;
    const timeoutMs = opts.timeout ?? this.timeoutMs;
    const started = performance.now();
    const work = impl.run(call, algorithm, seq, sig, timeoutMs);
    // recorded once the backend took it (a call it refuses at once leaves nothing in flight)
    const trace = this.trace;
    const rec = trace?.collective(
      seq,
      op,
      algorithm,
      dtype ?? 'none',
      sig.count !== ANY_COUNT ? sig.count : dtype ? bytes / elementSize(dtype) : 0,
      timeoutMs,
      started,
    );
    // done already (a small collective over shared memory whose peers were there): no timer
    if (work.completed) {
      if (rec) trace!.completed(rec);
      this.finished(op, algorithm, dtype, bytes, started, work);
      return work.done;
    }
    const finish = (error?: Error) => this.finished(op, algorithm, dtype, bytes, started, work, error);
    // One promise settled by whichever comes first, the op or the timer (no Promise.race and no
    // timer promise: this runs for every collective). An op that ends after the timeout changes
    // nothing.
    const ctx: ErrorContext = { op, group: this.name, seq, rank: this.worldRank };
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (raw: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const err = work.fail(raw, ctx);
        if (rec) trace!.failed(rec, err.code);
        finish(err);
        if (!(rec && err instanceof DistTimeoutError)) {
          if (rec) this.worldTrace!.dumpIfAsked();
          reject(err);
          return;
        }
        // torch's desync report: before the error is raised, ask the other members (through the
        // store, bounded by CMESH_TRACE_EXCHANGE_MS) what they are doing, and name the ones not here
        void this.explainTimeout(err).then(reject);
      };
      const timer = setTimeout(() => {
        const peers = work.awaitedPeers();
        fail(
          new DistTimeoutError(`${op} timed out after ${timeoutMs} ms waiting for ranks [${peers.join(', ')}] (${describeContext(ctx)})`, { ...ctx, peers }),
        );
      }, timerMs(timeoutMs));
      work.done.then(() => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (rec) trace!.completed(rec);
        finish();
        resolve();
      }, fail);
    });
  }

  /** Counts a collective's bytes, and tells the observers (if any) how it went. */
  private finished(op: Collective, algorithm: string, dtype: DType | undefined, bytes: number, started: number, work: BackendOp, error?: Error): void {
    this.traffic.record(op, algorithm, work.bytesSent, work.bytesReceived);
    if (!hasCollectiveObservers()) return;
    notifyCollective({
      op,
      algorithm,
      backend: this.backend,
      dtype: dtype ?? 'none',
      bytes,
      bytesSent: work.bytesSent,
      bytesReceived: work.bytesReceived,
      durationSeconds: (performance.now() - started) / 1000,
      worldSize: this.size,
      rank: this.rank,
      group: this.name,
      error: error && { name: error.name, message: error.message, code: (error as { code?: string }).code ?? error.name },
    });
  }

  /** The timeout's error, with what every other member was doing when it fired (when they said). */
  private async explainTimeout(err: DistTimeoutError): Promise<DistTimeoutError> {
    const world = this.worldTrace!;
    let out = err;
    try {
      const desync = await world.desync(this.trace!);
      if (desync?.lines.length) {
        out = new DistTimeoutError(`${err.message}; ${desync.lines.join('; ')}`, err.context);
        out.desync = desync.report;
      }
    } catch {
      // the plain timeout is still the answer
    }
    world.dumpIfAsked();
    return out;
  }

  /** Runs a send or recv with the group's timeout; its bytes count under "send/p2p" / "recv/p2p". */
  private p2p<T>(
    op: 'send' | 'recv',
    tag: number,
    timeoutMs: number | undefined,
    tensor: Tensor,
    peer: number | undefined,
    start: (ms: number) => BackendOp<T>,
  ): Promise<T> {
    const ms = timeoutMs ?? this.timeoutMs;
    const work = start(ms);
    const trace = this.trace;
    const rec: TraceRecord | undefined = trace?.p2p(op, peer, dtypeOf(tensor), tensor.length, ms);
    const peers = work.awaitedPeers();
    const ctx: ErrorContext = { op, group: this.name, rank: this.worldRank, peers };
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const fail = (raw: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const err = work.fail(raw, ctx);
        if (rec) {
          trace!.failed(rec, err.code);
          this.worldTrace!.dumpIfAsked();
        }
        reject(err);
      };
      const timer = setTimeout(() => {
        fail(new DistTimeoutError(`${op} (tag ${tag}) timed out after ${ms} ms waiting for ranks [${peers.join(', ')}] (${describeContext(ctx)})`, ctx));
      }, timerMs(ms));
      work.done.then((v) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (rec) trace!.completed(rec);
        this.traffic.record(op, 'p2p', work.bytesSent, work.bytesReceived);
        resolve(v);
      }, fail);
    });
  }
}
