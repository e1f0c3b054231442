// A process group over the TCP mesh: torch.distributed's ProcessGroupGloo for Node. Validates
// every call before it takes a sequence number, runs the chosen algorithm on a per-call Comm, and
// turns transport failures into typed errors that name op, group, seq, this rank and the peers.
import { ALGORITHMS, AlgorithmName, Scratch } from './algorithms';
import { CostTransport, chooseAlgorithm } from './cost-model';
import {
  CmeshError,
  CollectiveMismatchError,
  DistTimeoutError,
  ErrorContext,
  InvalidArgumentError,
  NotInitializedError,
  PeerFailureError,
  describeContext,
} from './errors';
import { hasCollectiveObservers, notifyCollective } from './observers';
import type { Collective } from './ops/names';
import { describeSignature, signature } from './ops/signature';
import { sameDtype, sameLength, splitSizes, tensorArg, tensorList, timeoutArg } from './ops/validate';
import { ReduceOp, validateReduceOp } from './reduce-op';
import { DTYPES, Tensor, bytesOf, dtypeOf, viewAs } from './tensor/dtype';
import { TrafficCounter, TrafficCounters } from './traffic';
import { FrameKind, NO_SIGNATURE, OpSignature } from './transport/frame';
import type { Mesh } from './transport/mesh';
import { OpComm } from './transport/op-comm';
import { FrameMismatch } from './transport/peer-connection';

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
  readonly backend = 'tcp';
  readonly traffic = new TrafficCounter();
  private seq = 0;
  private destroyed = false;
  private readonly scratchPool: Scratch[] = [];

  constructor(
    readonly id: number,
    /** Group rank -> world rank (sorted, like torch). */
    readonly worldRanks: readonly number[],
    private readonly mesh: Mesh,
    public timeoutMs: number = DEFAULT_TIMEOUT_MS,
  ) {
    this.rank = worldRanks.indexOf(mesh.rank);
    this.size = worldRanks.length;
    this.transport = mesh.allOnShm(worldRanks) ? 'shm' : 'tcp';
  }

  /** The cost model's parameters: shared memory's when every pair of members uses it (the same answer on every member). */
  private readonly transport: CostTransport;

  /** CMESH_ALGO and LOCAL_WORLD_SIZE as they were when the group was made (read once, like torch's env). */
  private readonly env = { CMESH_ALGO: process.env.CMESH_ALGO, LOCAL_WORLD_SIZE: process.env.LOCAL_WORLD_SIZE };

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

  markDestroyed(): void {
    this.destroyed = true;
  }

  get isDestroyed(): boolean {
    return this.destroyed;
  }

  // ---- point to point (ranks are world ranks, like torch) ----

  send(tensor: Tensor, dst: number, tag = 0, opts: OpOptions = {}): Promise<void> {
    const t = this.checkP2P('send', tensor, tag, opts);
    this.memberRank('send', dst, 'dst');
    if (dst === this.mesh.rank) throw new InvalidArgumentError(`send: dst ${dst} is this rank; sending to yourself is not allowed`, { op: 'send' });
    const data = bytesOf(t);
    return this.guard('send', tag, opts.timeout, [dst], () => this.mesh.send(dst, FrameKind.P2P, this.id, tag, NO_SIGNATURE, data)).then(() => {
      this.traffic.record('send', 'p2p', data.byteLength, 0);
    });
  }

  /** Receives into `tensor`; src undefined = from any member. Resolves with the sender's world rank. */
  recv(tensor: Tensor, src: number | undefined, tag = 0, opts: OpOptions = {}): Promise<number> {
    const t = this.checkP2P('recv', tensor, tag, opts);
    if (src !== undefined) {
      this.memberRank('recv', src, 'src');
      if (src === this.mesh.rank) throw new InvalidArgumentError(`recv: src ${src} is this rank`, { op: 'recv' });
    }
    const into = bytesOf(t);
    const others = this.worldRanks.filter((r) => r !== this.mesh.rank);
    const r = src === undefined ? this.mesh.recvAny(this.id, tag, into, others) : this.mesh.recv(src, FrameKind.P2P, this.id, tag, NO_SIGNATURE, into);
    return this.guard('recv', tag, opts.timeout, src === undefined ? others : [src], () => r.done, r.cancel).then((from) => {
      this.traffic.record('recv', 'p2p', 0, into.byteLength);
      return from;
    });
  }

  // ---- collectives ----

  broadcast(tensor: Tensor, src: number, opts: RootOptions<'broadcast'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'broadcast');
    const root = this.memberRank('broadcast', src, 'src');
    const data = bytesOf(t);
    return this.collective('broadcast', opts, data.byteLength, signature('broadcast', dtypeOf(t), t.length, src), (comm, scratch, algo) =>
      ALGORITHMS.broadcast[algo].run(comm, data, root, scratch),
    );
  }

  reduce(tensor: Tensor, dst: number, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduce'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'reduce');
    validateReduceOp(op, dtypeOf(t));
    const root = this.memberRank('reduce', dst, 'dst');
    return this.collective('reduce', opts, t.byteLength, signature('reduce', dtypeOf(t), t.length, dst), (comm, scratch, algo) =>
      ALGORITHMS.reduce[algo].run(comm, t, op, root, scratch),
    );
  }

  allReduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'allReduce'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'allReduce');
    validateReduceOp(op, dtypeOf(t));
    return this.collective('allReduce', opts, t.byteLength, signature('allReduce', dtypeOf(t), t.length), (comm, scratch, algo) =>
      ALGORITHMS.allReduce[algo].run(comm, t, op, scratch),
    );
  }

  gather(tensor: Tensor, gatherList: Tensor[] | undefined, dst: number, opts: RootOptions<'gather'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'gather');
    const root = this.memberRank('gather', dst, 'dst');
    let outputs: Uint8Array[] | undefined;
    if (this.rank === root) {
      const list = tensorList(gatherList, this.size, 'gatherList', 'gather', t);
      list.forEach((x, i) => sameLength(x, t.length, `gatherList[${i}]`, 'gather'));
      outputs = list.map(bytesOf);
    } else if (gatherList !== undefined && gatherList.length) {
      throw new InvalidArgumentError('gather: gatherList must NOT be specified on non-destination ranks', { op: 'gather' });
    }
    return this.collective('gather', opts, t.byteLength * this.size, signature('gather', dtypeOf(t), t.length, dst), (comm, _s, algo) =>
      ALGORITHMS.gather[algo].run(comm, bytesOf(t), outputs, root),
    );
  }

  scatter(tensor: Tensor, scatterList: Tensor[] | undefined, src: number, opts: RootOptions<'scatter'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'scatter');
    const root = this.memberRank('scatter', src, 'src');
    let inputs: Uint8Array[] | undefined;
    if (this.rank === root) {
      const list = tensorList(scatterList, this.size, 'scatterList', 'scatter', t);
      list.forEach((x, i) => sameLength(x, t.length, `scatterList[${i}]`, 'scatter'));
      inputs = list.map(bytesOf);
    } else if (scatterList !== undefined && scatterList.length) {
      throw new InvalidArgumentError('scatter: scatterList must NOT be specified on non-source ranks', { op: 'scatter' });
    }
    return this.collective('scatter', opts, t.byteLength * this.size, signature('scatter', dtypeOf(t), t.length, src), (comm, _s, algo) =>
      ALGORITHMS.scatter[algo].run(comm, bytesOf(t), inputs, root),
    );
  }

  allGather(tensorList_: Tensor[], tensor: Tensor, opts: RootOptions<'allGather'> = {}): Promise<void> {
    const t = tensorArg(tensor, 'tensor', 'allGather');
    const list = tensorList(tensorList_, this.size, 'tensorList', 'allGather', t);
    list.forEach((x, i) => sameLength(x, t.length, `tensorList[${i}]`, 'allGather'));
    const outputs = list.map(bytesOf);
    return this.collective('allGather', opts, t.byteLength * this.size, signature('allGather', dtypeOf(t), t.length), (comm, scratch, algo) =>
      ALGORITHMS.allGather[algo].run(comm, bytesOf(t), outputs, scratch),
    );
  }

  allGatherIntoTensor(output: Tensor, input: Tensor, opts: RootOptions<'allGather'> = {}): Promise<void> {
    const inp = tensorArg(input, 'input', 'allGatherIntoTensor');
    const out = tensorArg(output, 'output', 'allGatherIntoTensor');
    sameDtype(out, dtypeOf(inp), 'output', 'allGatherIntoTensor');
    sameLength(out, inp.length * this.size, 'output (input length x group size)', 'allGatherIntoTensor');
    const n = inp.length;
    const outputs = Array.from({ length: this.size }, (_, i) => bytesOf(out.subarray(i * n, (i + 1) * n) as Tensor));
    return this.collective('allGather', opts, out.byteLength, signature('allGather', dtypeOf(inp), n), (comm, scratch, algo) =>
      ALGORITHMS.allGather[algo].run(comm, bytesOf(inp), outputs, scratch),
    );
  }

  reduceScatter(output: Tensor, inputList: Tensor[], op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduceScatter'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'reduceScatter');
    validateReduceOp(op, dtypeOf(out));
    const list = tensorList(inputList, this.size, 'inputList', 'reduceScatter', out);
    list.forEach((x, i) => sameLength(x, out.length, `inputList[${i}]`, 'reduceScatter'));
    const n = out.length;
    return this.collective('reduceScatter', opts, out.byteLength * this.size, signature('reduceScatter', dtypeOf(out), n), (comm, scratch, algo) => {
      // the algorithms want one contiguous input; the copy lives in a second scratch
      const staging = this.takeScratch();
      const input = viewAs(staging.get(out.byteLength * this.size), dtypeOf(out));
      list.forEach((x, i) => input.set(x as never, i * n));
      const counts = new Array(this.size).fill(n);
      return ALGORITHMS.reduceScatter[algo].run(comm, input, out, counts, op, scratch).finally(() => this.scratchPool.push(staging));
    });
  }

  reduceScatterTensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, opts: RootOptions<'reduceScatter'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'reduceScatterTensor');
    const inp = tensorArg(input, 'input', 'reduceScatterTensor');
    sameDtype(inp, dtypeOf(out), 'input', 'reduceScatterTensor');
    validateReduceOp(op, dtypeOf(out));
    sameLength(inp, out.length * this.size, 'input (output length x group size)', 'reduceScatterTensor');
    const counts = new Array(this.size).fill(out.length);
    return this.collective('reduceScatter', opts, inp.byteLength, signature('reduceScatter', dtypeOf(out), out.length), (comm, scratch, algo) =>
      ALGORITHMS.reduceScatter[algo].run(comm, inp, out, counts, op, scratch),
    );
  }

  allToAll(outputList: Tensor[], inputList: Tensor[], opts: RootOptions<'allToAll'> = {}): Promise<void> {
    if (!Array.isArray(inputList) || !inputList.length) throw new InvalidArgumentError('allToAll: inputList must be a non-empty array of tensors', { op: 'allToAll' });
    const first = tensorArg(inputList[0], 'inputList[0]', 'allToAll');
    const ins = tensorList(inputList, this.size, 'inputList', 'allToAll', first);
    const outs = tensorList(outputList, this.size, 'outputList', 'allToAll', first);
    const bytes = ins.reduce((a, x) => a + x.byteLength, 0);
    return this.collective('allToAll', opts, bytes, signature('allToAll', dtypeOf(first), undefined), (comm, _s, algo) =>
      ALGORITHMS.allToAll[algo].run(comm, ins.map(bytesOf), outs.map(bytesOf)),
    );
  }

  allToAllSingle(output: Tensor, input: Tensor, outputSplitSizes?: number[], inputSplitSizes?: number[], opts: RootOptions<'allToAll'> = {}): Promise<void> {
    const out = tensorArg(output, 'output', 'allToAllSingle');
    const inp = tensorArg(input, 'input', 'allToAllSingle');
    sameDtype(out, dtypeOf(inp), 'output', 'allToAllSingle');
    const inSplits = splitSizes(inputSplitSizes, this.size, inp.length, 'inputSplitSizes', 'allToAllSingle');
    const outSplits = splitSizes(outputSplitSizes, this.size, out.length, 'outputSplitSizes', 'allToAllSingle');
    const blocks = (t: Tensor, splits: number[]) => {
      let off = 0;
      return splits.map((n) => bytesOf(t.subarray(off, (off += n)) as Tensor));
    };
    const ins = blocks(inp, inSplits);
    const outs = blocks(out, outSplits);
    return this.collective('allToAll', opts, inp.byteLength, signature('allToAll', dtypeOf(inp), undefined), (comm, _s, algo) =>
      ALGORITHMS.allToAll[algo].run(comm, ins, outs),
    );
  }

  barrier(opts: OpOptions = {}): Promise<void> {
    return this.collective('barrier', opts, 0, signature('barrier', undefined, undefined), (comm, _s, algo) => ALGORITHMS.barrier[algo].run(comm));
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
    if (!Number.isInteger(tag) || tag < 0 || tag > 0xffffffff) throw new InvalidArgumentError(`${op}: tag must be a non-negative 32-bit integer, got ${tag}`, { op });
    return tensorArg(tensor, 'tensor', op);
  }

  /** Checks a world rank belongs to the group and returns its group rank. */
  private memberRank(op: string, worldRank: unknown, what: string): number {
    if (typeof worldRank !== 'number' || !Number.isInteger(worldRank)) {
      throw new InvalidArgumentError(`${op}: ${what} must be an integer rank, got ${String(worldRank)}`, { op, group: this.name });
    }
    const g = this.groupRank(worldRank);
    if (g < 0) {
      throw new InvalidArgumentError(`${op}: ${what} rank ${worldRank} is not in group ${this.name} (ranks [${this.worldRanks.join(', ')}])`, { op, group: this.name });
    }
    return g;
  }

  private takeScratch(): Scratch {
    return this.scratchPool.pop() ?? new Scratch();
  }

  private collective<C extends Collective>(
    op: C,
    opts: RootOptions<C>,
    bytes: number,
    sig: OpSignature,
    body: (comm: OpComm, scratch: Scratch, algorithm: AlgorithmName<C>) => Promise<void>,
  ): Promise<void> {
    this.checkAlive(op);
    timeoutArg(opts.timeout, op);
    const algorithm = chooseAlgorithm(op, bytes, this.size, { algorithm: opts.algorithm, env: this.env, transport: this.transport });
    const seq = this.seq++;
    const comm = new OpComm(this.mesh, this.rank, this.size, this.worldRanks, this.id, seq, sig);
    const ctx: ErrorContext = { op, group: this.name, seq, rank: this.mesh.rank };
    const timeoutMs = opts.timeout ?? this.timeoutMs;
    const scratch = this.takeScratch();
    const started = performance.now();
    const dtype = sig.dtype ? DTYPES[sig.dtype - 1] : 'none';
    const finish = (error?: Error) => {
      this.traffic.record(op, algorithm, comm.bytesSent, comm.bytesReceived);
      if (!hasCollectiveObservers()) return;
      notifyCollective({
        op,
        algorithm,
        backend: this.backend,
        dtype,
        bytes,
        bytesSent: comm.bytesSent,
        bytesReceived: comm.bytesReceived,
        durationSeconds: (performance.now() - started) / 1000,
        worldSize: this.size,
        rank: this.rank,
        group: this.name,
        error: error && { name: error.name, message: error.message, code: (error as { code?: string }).code ?? error.name },
      });
    };
    // One promise settled by whichever comes first, the body or the timer (no Promise.race and
    // no timer promise: this runs for every collective). A body that ends after the timeout
    // changes nothing.
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (raw: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        comm.cancelAll();
        const err = this.explain(raw, ctx, comm);
        this.abortPeers(seq, err);
        finish(err);
        reject(err);
      };
      const timer = setTimeout(() => {
        const peers = comm.awaitedPeers();
        fail(new DistTimeoutError(`${op} timed out after ${timeoutMs} ms waiting for ranks [${peers.join(', ')}] (${describeContext(ctx)})`, { ...ctx, peers }));
      }, timeoutMs);
      let run: Promise<void>;
      try {
        run = body(comm, scratch, algorithm);
      } catch (e) {
        run = Promise.reject(e);
      }
      run.then(() => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.scratchPool.push(scratch);
        finish();
        resolve();
      }, fail);
    });
  }

  /** Runs a P2P transfer with the group's timeout. */
  private guard<T>(op: string, tag: number, timeoutMs: number | undefined, peers: number[], fn: () => Promise<T>, cancel?: () => boolean): Promise<T> {
    const ms = timeoutMs ?? this.timeoutMs;
    const ctx: ErrorContext = { op, group: this.name, rank: this.mesh.rank, peers };
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        cancel?.();
        reject(new DistTimeoutError(`${op} (tag ${tag}) timed out after ${ms} ms waiting for ranks [${peers.join(', ')}] (${describeContext(ctx)})`, ctx));
      }, ms);
    });
    const run = fn();
    run.catch(() => {});
    return Promise.race([run, timeout]).then(
      (v) => {
        clearTimeout(timer);
        return v;
      },
      (raw: unknown) => {
        clearTimeout(timer);
        if (raw instanceof PeerFailureError) throw new PeerFailureError(`${raw.message} (${describeContext({ ...ctx, peers: raw.context.peers })})`, { ...ctx, peers: raw.context.peers });
        if (raw instanceof FrameMismatch) {
          const full = { ...ctx, peers: [raw.peer] };
          throw new CollectiveMismatchError(`${op}: rank ${raw.peer} sent ${raw.theirs.length} bytes where ${raw.expectedLength} were expected (${describeContext(full)})`, full);
        }
        throw raw;
      },
    );
  }

  private explain(raw: unknown, ctx: ErrorContext, comm: OpComm): CmeshError {
    if (raw instanceof FrameMismatch) {
      const theirs = describeSignature(raw.theirs);
      const ours = describeSignature(raw.ours);
      const detail =
        theirs === ours ? `rank ${this.worldRanks[raw.peer] ?? raw.peer} sent ${raw.theirs.length} bytes where ${raw.expectedLength} were expected` : `rank ${raw.peer} called ${theirs} but rank ${this.mesh.rank} called ${ours}`;
      return new CollectiveMismatchError(`collective mismatch: ${detail} (${describeContext(ctx)})`, { ...ctx, peers: [raw.peer] });
    }
    if (raw instanceof CmeshError) {
      const peers = raw.context.peers ?? comm.awaitedPeers();
      const full = { ...ctx, peers };
      const msg = `${ctx.op} failed: ${raw.message.replace(/ \(op=.*\)$/, '').replace(/^\w+ failed: /, '')} (${describeContext(full)})`;
      if (raw instanceof PeerFailureError) return new PeerFailureError(msg, full);
      if (raw instanceof DistTimeoutError) return raw.context.op ? raw : new DistTimeoutError(msg, full);
      if (raw instanceof CollectiveMismatchError) return new CollectiveMismatchError(msg, full);
      return raw;
    }
    const e = raw as Error;
    return new CmeshError(`${ctx.op} failed: ${e?.message ?? String(raw)} (${describeContext(ctx)})`, ctx);
  }

  /** Makes every other member fail this op at once instead of waiting on a rank that never sends. */
  private abortPeers(seq: number, err: CmeshError): void {
    const failedRank = err.context.peers?.[0] ?? this.mesh.rank;
    const reason = err instanceof PeerFailureError ? 'peer' : err instanceof CollectiveMismatchError ? 'mismatch' : err instanceof DistTimeoutError ? 'timeout' : 'error';
    const message =
      err instanceof PeerFailureError && failedRank !== this.mesh.rank
        ? `rank ${failedRank} died or closed its connection`
        : err.message.replace(/ \(op=.*\)$/, '');
    if (this.mesh.abortFor(FrameKind.Collective, this.id, seq)) return; // a peer told us: it told everyone
    if (err instanceof DistTimeoutError) return; // every rank in the op runs its own timer and names whom it waits for
    this.mesh.broadcastAbort(this.id, seq, { failedRank, message, reason }, this.worldRanks.filter((r) => r !== this.mesh.rank));
  }
}
