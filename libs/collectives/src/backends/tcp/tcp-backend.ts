// The tcp backend: cmesh's CPU data plane (torch's Gloo). A group's ops run one of the
// registry's algorithms on a per-op OpComm over the process's Mesh (TCP between hosts, shared
// memory within one); transport failures become typed errors naming the peers, and a failing
// rank tells the others so that none waits on it.
import { ALGORITHMS, AlgorithmName, Scratch } from '../../algorithms';
import { CostTransport, HostLayoutSummary, chooseAlgorithm } from '../../cost-model';
import { CmeshError, CollectiveMismatchError, DistTimeoutError, ErrorContext, PeerFailureError, describeContext } from '../../errors';
import { debug, debugOn } from '../../debug';
import { COLLECTIVES, Collective } from '../../ops/names';
import { describeSignature } from '../../ops/signature';
import { REDUCE_OPS } from '../../reduce-op';
import { DTYPES, Tensor, bytesOf, dtypeOf, viewAs } from '../../tensor/dtype';
import { FrameKind, NO_SIGNATURE, OpSignature } from '../../transport/frame';
import { Mesh, abortError } from '../../transport/mesh';
import { FAST_ALGORITHM, FastGroup, FastOp } from '../../transport/shm/fast';
import { OpComm } from '../../transport/op-comm';
import { FrameMismatch } from '../../transport/peer-connection';
import type { Backend, BackendCapabilities, BackendOp, CollectiveCall } from '../backend';

/** Everything: every collective and algorithm, every dtype and reduce op, any-source receives. */
export const TCP_CAPABILITIES: BackendCapabilities = Object.freeze({
  collectives: new Set(COLLECTIVES),
  p2p: true,
  recvAnySource: true,
  dtypes: new Set(DTYPES),
  reduceOps: new Set(REDUCE_OPS),
  unevenAllToAll: true,
  algorithms: true,
});

export class TcpBackend implements Backend {
  readonly name = 'tcp' as const;
  readonly capabilities = TCP_CAPABILITIES;
  /** This process's rank in the group. */
  private readonly rank: number;
  private readonly size: number;
  private readonly scratchPool: Scratch[] = [];
  /** The cost model's parameters: shared memory's when every pair of members uses it (the same answer on every member). */
  private readonly transport: CostTransport;
  /** Host of each group rank, and the layout the cost model sees when the group spans hosts. */
  private readonly hosts: readonly number[];
  private readonly layout?: HostLayoutSummary;
  /** CMESH_ALGO and LOCAL_WORLD_SIZE as they were when the group was made (read once, like torch's env). */
  private readonly env: { CMESH_ALGO?: string; LOCAL_WORLD_SIZE?: string };
  /** Small collectives in one step over shared memory (every member on this host's shared memory). */
  private readonly fast?: FastGroup;
  private readonly fastLogged = new Set<string>();

  constructor(
    private readonly mesh: Mesh,
    private readonly groupId: number,
    /** Group rank -> world rank. */
    private readonly worldRanks: readonly number[],
    /** the settings the group reads (InitOptions.env) */
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.env = { CMESH_ALGO: env.CMESH_ALGO, LOCAL_WORLD_SIZE: env.LOCAL_WORLD_SIZE };
    this.rank = worldRanks.indexOf(mesh.rank);
    this.size = worldRanks.length;
    this.transport = mesh.allOnShm(worldRanks) ? 'shm' : 'tcp';
    this.hosts = mesh.hostsOf(worldRanks);
    const perHost = new Map<number, number[]>();
    this.hosts.forEach((h, i) => perHost.set(h, [...(perHost.get(h) ?? []), worldRanks[i]]));
    if (perHost.size > 1) {
      const counts = [...perHost.values()].map((m) => m.length);
      this.layout = {
        hosts: perHost.size,
        perHost: Math.max(...counts),
        uniform: counts.every((c) => c === counts[0]),
        // what was asked for, not what each host got: a rank knows only its own host's pairs, and
        // every rank must reach the same choice
        intra: mesh.mode === 'tcp' ? 'tcp' : 'shm',
      };
    }
    if (this.transport === 'shm') {
      this.fast = mesh.fastPath(worldRanks, (seq) => {
        const notice = mesh.abortFor(FrameKind.Collective, groupId, seq);
        return notice && abortError(notice, undefined, mesh.rank);
      });
    }
  }

  plan(call: CollectiveCall, bytes: number, requested: string | undefined): string {
    // an algorithm asked for (the option, CMESH_ALGO) runs as asked
    if (requested === undefined && !this.env.CMESH_ALGO && this.fast?.accepts(call)) {
      if (debugOn) this.logFast(call.op, bytes);
      return FAST_ALGORITHM;
    }
    return chooseAlgorithm(call.op, bytes, this.size, {
      algorithm: requested as AlgorithmName<Collective> | undefined,
      env: this.env,
      transport: this.transport,
      hosts: this.layout,
    });
  }

  /** The choice's debug line, once per (collective, size), as the cost model logs its own. */
  private logFast(op: Collective, bytes: number): void {
    const key = `${op}/${bytes}`;
    if (this.fastLogged.has(key) || this.fastLogged.size > 4096) return;
    this.fastLogged.add(key);
    debug('algorithm', `${op} of ${bytes} B at world ${this.size}: ${FAST_ALGORITHM} (cost model, shm)`);
  }

  run(call: CollectiveCall, algorithm: string, seq: number, sig: OpSignature): BackendOp {
    if (algorithm === FAST_ALGORITHM) return new FastCollectiveOp(this, this.fast!, this.fast!.run(call, seq, sig));
    const comm = new OpComm(this.mesh, this.rank, this.size, this.worldRanks, this.groupId, seq, sig, this.hosts);
    const scratch = this.scratchPool.pop() ?? new Scratch();
    let done: Promise<void>;
    try {
      done = this.start(call, algorithm, comm, scratch);
    } catch (e) {
      done = Promise.reject(e);
    }
    // the scratch is free once the algorithm has finished; after a failure parts of it may still be written
    done = done.then(() => {
      this.scratchPool.push(scratch);
    });
    // the group's small collectives number this op too: a peer that took the flags path for it
    // fails this op with a mismatch (fast.ts)
    const marker = this.fast?.mark(seq, sig);
    if (marker) done = Promise.race([done, marker.done.then(() => new Promise<never>(() => {}))]);
    return new TcpCollectiveOp(this, comm, seq, done, marker && (() => this.fast!.cancel(marker)));
  }

  send(tensor: Tensor, dst: number, tag: number): BackendOp {
    const data = bytesOf(tensor);
    const done = this.mesh.send(dst, FrameKind.P2P, this.groupId, tag, NO_SIGNATURE, data);
    return new TcpP2POp(done, [dst], undefined, data.byteLength, 0);
  }

  recv(tensor: Tensor, src: number | undefined, tag: number): BackendOp<number> {
    const into = bytesOf(tensor);
    const others = src === undefined ? this.worldRanks.filter((r) => r !== this.mesh.rank) : [src];
    const r =
      src === undefined ? this.mesh.recvAny(this.groupId, tag, into, others) : this.mesh.recv(src, FrameKind.P2P, this.groupId, tag, NO_SIGNATURE, into);
    return new TcpP2POp(r.done, others, r.cancel, 0, into.byteLength);
  }

  /** The mesh belongs to the world (every group shares it); destroyProcessGroup closes it. */
  async close(): Promise<void> {}

  private start(call: CollectiveCall, algorithm: string, comm: OpComm, scratch: Scratch): Promise<void> {
    switch (call.op) {
      case 'broadcast':
        return ALGORITHMS.broadcast[algorithm as AlgorithmName<'broadcast'>].run(comm, bytesOf(call.tensor), call.root, scratch);
      case 'reduce':
        return ALGORITHMS.reduce[algorithm as AlgorithmName<'reduce'>].run(comm, call.tensor, call.redOp, call.root, scratch);
      case 'allReduce':
        return ALGORITHMS.allReduce[algorithm as AlgorithmName<'allReduce'>].run(comm, call.tensor, call.redOp, scratch);
      case 'gather':
        return ALGORITHMS.gather[algorithm as AlgorithmName<'gather'>].run(comm, bytesOf(call.input), call.outputs?.map(bytesOf), call.root);
      case 'scatter':
        return ALGORITHMS.scatter[algorithm as AlgorithmName<'scatter'>].run(comm, bytesOf(call.output), call.inputs?.map(bytesOf), call.root);
      case 'allGather':
        return ALGORITHMS.allGather[algorithm as AlgorithmName<'allGather'>].run(comm, bytesOf(call.input), call.outputs.map(bytesOf), scratch);
      case 'reduceScatter':
        return this.reduceScatter(call, algorithm as AlgorithmName<'reduceScatter'>, comm, scratch);
      case 'allToAll':
        return ALGORITHMS.allToAll[algorithm as AlgorithmName<'allToAll'>].run(comm, call.inputs.map(bytesOf), call.outputs.map(bytesOf));
      case 'barrier':
        return ALGORITHMS.barrier[algorithm as AlgorithmName<'barrier'>].run(comm);
    }
  }

  private reduceScatter(
    call: Extract<CollectiveCall, { op: 'reduceScatter' }>,
    algorithm: AlgorithmName<'reduceScatter'>,
    comm: OpComm,
    scratch: Scratch,
  ): Promise<void> {
    const out = call.output;
    const n = out.length;
    const counts = new Array(this.size).fill(n);
    if (!Array.isArray(call.input)) return ALGORITHMS.reduceScatter[algorithm].run(comm, call.input as Tensor, out, counts, call.redOp, scratch);
    // the algorithms want one contiguous input; the copy lives in a second scratch
    const staging = this.scratchPool.pop() ?? new Scratch();
    const input = viewAs(staging.get(out.byteLength * this.size), dtypeOf(out));
    (call.input as readonly Tensor[]).forEach((x, i) => input.set(x as never, i * n));
    return ALGORITHMS.reduceScatter[algorithm].run(comm, input, out, counts, call.redOp, scratch).finally(() => this.scratchPool.push(staging));
  }

  /** The typed error for a collective's failure, naming the peer to blame. */
  explain(raw: unknown, ctx: ErrorContext, comm: { awaitedPeers(): number[] }): CmeshError {
    if (raw instanceof FrameMismatch) {
      const theirs = describeSignature(raw.theirs);
      const ours = describeSignature(raw.ours);
      const detail =
        theirs === ours
          ? `rank ${this.worldRanks[raw.peer] ?? raw.peer} sent ${raw.theirs.length} bytes where ${raw.expectedLength} were expected`
          : `rank ${raw.peer} called ${theirs} but rank ${this.mesh.rank} called ${ours}`;
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
  abortPeers(seq: number, err: CmeshError): void {
    const failedRank = err.context.peers?.[0] ?? this.mesh.rank;
    const reason =
      err instanceof PeerFailureError ? 'peer' : err instanceof CollectiveMismatchError ? 'mismatch' : err instanceof DistTimeoutError ? 'timeout' : 'error';
    const message =
      err instanceof PeerFailureError && failedRank !== this.mesh.rank
        ? `rank ${failedRank} died or closed its connection`
        : err.message.replace(/ \(op=.*\)$/, '');
    if (this.mesh.abortFor(FrameKind.Collective, this.groupId, seq)) return; // a peer told us: it told everyone
    if (err instanceof DistTimeoutError) return; // every rank in the op runs its own timer and names whom it waits for
    this.mesh.broadcastAbort(
      this.groupId,
      seq,
      { failedRank, message, reason },
      this.worldRanks.filter((r) => r !== this.mesh.rank),
    );
  }
}

class TcpCollectiveOp implements BackendOp {
  constructor(
    private readonly backend: TcpBackend,
    private readonly comm: OpComm,
    private readonly seq: number,
    readonly done: Promise<void>,
    /** withdraws the op's marker on the flags path */
    private readonly unmark?: () => void,
  ) {}

  get bytesSent(): number {
    return this.comm.bytesSent;
  }

  get bytesReceived(): number {
    return this.comm.bytesReceived;
  }

  awaitedPeers(): number[] {
    return this.comm.awaitedPeers();
  }

  fail(raw: unknown, ctx: ErrorContext): CmeshError {
    this.comm.cancelAll();
    this.unmark?.();
    const err = this.backend.explain(raw, ctx, this.comm);
    this.backend.abortPeers(this.seq, err);
    return err;
  }
}

class FastCollectiveOp implements BackendOp {
  constructor(
    private readonly backend: TcpBackend,
    private readonly group: FastGroup,
    private readonly op: FastOp,
  ) {}

  get done(): Promise<void> {
    return this.op.done;
  }

  get completed(): boolean {
    return this.op.ok;
  }

  get bytesSent(): number {
    return this.op.bytesSent;
  }

  get bytesReceived(): number {
    return this.op.bytesReceived;
  }

  awaitedPeers(): number[] {
    return this.group.awaited(this.op);
  }

  fail(raw: unknown, ctx: ErrorContext): CmeshError {
    const err = this.backend.explain(raw, ctx, this);
    this.group.cancel(this.op);
    this.backend.abortPeers(this.op.seq, err);
    return err;
  }
}

class TcpP2POp<T> implements BackendOp<T> {
  constructor(
    readonly done: Promise<T>,
    private readonly peers: number[],
    private readonly cancel: (() => boolean) | undefined,
    readonly bytesSent: number,
    readonly bytesReceived: number,
  ) {}

  awaitedPeers(): number[] {
    return this.peers;
  }

  /** A timeout withdraws the receive; a dead peer or a size mismatch is named. */
  fail(raw: unknown, ctx: ErrorContext): CmeshError {
    if (raw instanceof DistTimeoutError) {
      this.cancel?.();
      return raw;
    }
    if (raw instanceof PeerFailureError)
      return new PeerFailureError(`${raw.message} (${describeContext({ ...ctx, peers: raw.context.peers })})`, { ...ctx, peers: raw.context.peers });
    if (raw instanceof FrameMismatch) {
      const full = { ...ctx, peers: [raw.peer] };
      return new CollectiveMismatchError(
        `${ctx.op}: rank ${raw.peer} sent ${raw.theirs.length} bytes where ${raw.expectedLength} were expected (${describeContext(full)})`,
        full,
      );
    }
    if (raw instanceof CmeshError) return raw;
    return new CmeshError(`${ctx.op} failed: ${(raw as Error)?.message ?? String(raw)} (${describeContext(ctx)})`, ctx);
  }
}
