// One service group's member on this agent, in a child process (the library's process group is
// process-global, and a broken group is ended by ending this process): takes the member's ops
// from NATS in its order, runs each with the library among the group's agents, on the backend the
// placement names (tcp; nccl through the agent's sidecar on its GPU), and sends the result back;
// heartbeats, watches everyone's, and ends the group for all when someone is lost or an op fails.
// Started by ServiceWorkers with the placement over IPC.
import * as dist from '@cmesh/collectives';
import { Assembly, Liveness, chunkOf, describe, publishChunks } from '@cmesh/client';
import { ClusterNames, SVC_HEARTBEAT_MS, SvcEnd, SvcEndSchema, SvcHeartbeatSchema, SvcOp, SvcOpSchema, SvcPlaced, SvcRankStatus, SvcResult, clusterNames, decodeMessage, svcElements } from '@cmesh/protocol';
import { connect, JSONCodec, Msg, NatsConnection } from 'nats';
import { natsInitMethod } from '../backends/tcp/nats-init-method';
import { MemberOpStats } from './member-stats';
import { LocalServer } from './local-server';

export type ToMemberWorker = {
  type: 'start';
  placed: SvcPlaced;
  rank: number;
  natsUrl: string;
  cluster: string;
  /** for a group on nccl: the agent's GPU, and its sidecar's socket (or why the agent has none) */
  nccl: { device: number; socket?: string; reason?: string };
};

const json = JSONCodec();
/** After an op failed here, how long to wait for the end notice that names the first cause. */
const CAUSE_WAIT_MS = 500;
const INIT_TIMEOUT_MS = 60_000;

interface Queued {
  op: SvcOp;
  assembly: Assembly;
  /** when its last byte arrived (wall clock, ms: see SvcTiming) */
  receivedMs?: number;
  /** came by the local path: the result goes back that way */
  local?: boolean;
}

/** Wall clock in ms with a fraction, comparable between processes of one host. */
const nowMs = () => performance.timeOrigin + performance.now();

class MemberWorker {
  private nc!: NatsConnection;
  private readonly names: ClusterNames;
  private readonly queue = new Map<number, Queued>();
  private readonly early = new Map<number, { offset: number; data: Uint8Array }[]>();
  private next = 1;
  private running = false;
  private ended: SvcEnd | null = null;
  private readonly liveness: Liveness;
  private beat: NodeJS.Timeout | null = null;
  private ready = false;
  /** the op running now and ops done: for the status subject, and each op's report to the agent (metrics) */
  private readonly stats: MemberOpStats;
  /** the member's local path (it shares this host), when offered */
  private local: LocalServer | null = null;

  constructor(private readonly m: ToMemberWorker) {
    this.names = clusterNames(m.cluster);
    this.stats = new MemberOpStats(m.placed, m.rank, (r) => process.connected && process.send?.(r));
    this.liveness = new Liveness(m.placed.size, (rank, role) => {
      const who = describe(m.placed.members, rank, role);
      void this.end({ groupId: this.groupId, reason: 'lost', who, rank });
    });
  }

  get groupId(): string {
    return this.m.placed.groupId;
  }

  /**
   * Until the group ends; after a member left, also while this process winds down: the leaver
   * finished its ops, and an op of ours it took part in (a broadcast from it, say) may still
   * arrive here and complete from the data it already sent.
   */
  private get takesOps(): boolean {
    return !this.ended || this.ended.reason === 'left';
  }

  async start(): Promise<void> {
    const { placed, rank } = this.m;
    this.nc = await connect({ ...dist.natsLogin(), servers: this.m.natsUrl, name: `cmesh-svc-${placed.groupId}-${rank}` });
    this.nc.subscribe(this.names.svc.op(placed.groupId, rank), { callback: (err, msg) => !err && this.onOp(msg) });
    this.nc.subscribe(this.names.svc.heartbeat(placed.groupId), { callback: (err, msg) => !err && this.onHeartbeat(msg) });
    this.nc.subscribe(this.names.svc.end(placed.groupId), { callback: (err, msg) => !err && this.onEnd(msg) });
    this.nc.subscribe(this.names.svc.status(placed.groupId), { callback: (err, msg) => !err && msg.respond(json.encode(this.status())) });
    if (placed.members[rank]?.local) await this.offerLocal();
    const socket = this.local?.path;
    const heartbeat = () => this.publish(this.names.svc.heartbeat(placed.groupId), { rank, role: 'agent', ready: this.ready, ...(socket ? { socket } : {}) });
    this.beat = setInterval(heartbeat, SVC_HEARTBEAT_MS);
    await dist.initProcessGroup({
      ...this.backendOptions(),
      initMethod: natsInitMethod(this.m.natsUrl, placed.storePrefix),
      rank,
      worldSize: placed.size,
      // bounds the bootstrap (every agent's worker reaching the store); each op has its own deadline
      timeout: INIT_TIMEOUT_MS,
      bindToCore: false,
    });
    // ops were subscribed before: the members send them only once every agent said it is ready
    this.ready = true;
    heartbeat();
    this.liveness.start();
  }

  /**
   * The library backend the placement names: nccl on this agent's GPU through the agent's own
   * sidecar (attached, never spawned: the worker ending leaves the sidecar, which frees what the
   * worker's connection held), else tcp.
   */
  private backendOptions(): Pick<dist.InitOptions, 'backend' | 'deviceId' | 'nccl'> {
    if ((this.m.placed.backend ?? 'tcp') === 'tcp') return { backend: 'tcp' };
    const { device, socket, reason } = this.m.nccl;
    // the agent registered one, but it is gone since (failStart names the agent)
    if (!socket) throw new dist.NcclUnavailableError(`the agent has no working nccl backend now: ${reason ?? 'unknown reason'}`, 'initProcessGroup');
    return { backend: 'nccl', deviceId: device, nccl: { attachSocketPath: socket } };
  }

  /**
   * Why the process group could not start: the members and the other agents hear it (not only,
   * seconds later, that this one went silent). Not after the group ended: then this failure is
   * its consequence, and the end named the cause.
   */
  async failStart(err: Error): Promise<void> {
    if (this.ended) return;
    const error = { name: err.name, code: (err as dist.CmeshError).code, message: `${describe(this.m.placed.members, this.m.rank, 'agent')}: ${err.message}` };
    if (!this.nc || this.nc.isClosed()) return;
    this.publish(this.names.svc.end(this.groupId), { groupId: this.groupId, reason: 'failed', rank: this.m.rank, error } satisfies SvcEnd);
    await this.nc.flush().catch(() => undefined);
  }

  /** The local path for a member on this host; without it (no shm addon, no socket) the member stays on NATS. */
  private async offerLocal(): Promise<void> {
    const server = new LocalServer(
      this.m.placed.members[this.m.rank].member,
      (op, data) => this.take(op, data),
      () => undefined, // the member's end is seen by its heartbeats
    );
    try {
      await server.listen();
      this.local = server;
    } catch (err) {
      server.close();
      console.error(`service group ${this.groupId} rank ${this.m.rank}: no local path (${(err as Error).message}); the member stays on NATS`);
    }
  }

  /** This rank's answer on the status subject, with the backend its process group really runs on. */
  private status(): SvcRankStatus {
    const s = this.stats.status(this.queue.size);
    if (!this.ready) return s;
    const backend = dist.getBackend();
    return { ...s, backend, ...(backend === 'nccl' ? { device: this.m.nccl.device } : {}) };
  }

  private onHeartbeat(msg: Msg): void {
    const d = decodeMessage(SvcHeartbeatSchema, msg.data);
    if (d.ok) this.liveness.heard(d.value);
  }

  private onOp(msg: Msg): void {
    if (!this.takesOps) return;
    const chunk = chunkOf(msg);
    if (chunk) {
      const q = this.queue.get(chunk.seq);
      if (!q) {
        const list = this.early.get(chunk.seq) ?? [];
        list.push({ offset: chunk.offset, data: msg.data.slice() });
        this.early.set(chunk.seq, list);
        return;
      }
      const why = q.assembly.add(chunk.offset, msg.data);
      if (why) void this.fail(q.op, new dist.InvalidArgumentError(`op #${q.op.seq}: ${why}`));
      else {
        if (q.assembly.complete) q.receivedMs = nowMs();
        this.pump();
      }
      return;
    }
    const d = decodeMessage(SvcOpSchema, msg.data);
    if (!d.ok) {
      const seq = (JSON.parse(new TextDecoder().decode(msg.data)) as { seq?: unknown })?.seq;
      const err = new dist.InvalidArgumentError(`bad op: ${d.message}${d.issues ? `: ${d.issues.join('; ')}` : ''}`);
      if (typeof seq === 'number' && seq > 0) void this.fail({ seq } as SvcOp, err);
      return;
    }
    this.take(d.value);
  }

  /** A member's op: from NATS (its data follows in chunks), or by the local path with its data (`filled`). */
  private take(op: SvcOp, filled?: Uint8Array): void {
    if (!this.takesOps) return;
    const bad = this.invalid(op);
    if (bad) return void this.fail(op, new dist.InvalidArgumentError(`op #${op.seq}: ${bad}`));
    if (op.seq < this.next || this.queue.has(op.seq)) return void this.fail(op, new dist.InvalidArgumentError(`op #${op.seq} was already sent`));
    const q: Queued = { op, assembly: new Assembly(op.bytes, filled), local: filled !== undefined };
    this.queue.set(op.seq, q);
    for (const e of this.early.get(op.seq) ?? []) q.assembly.add(e.offset, e.data);
    this.early.delete(op.seq);
    if (q.assembly.complete) q.receivedMs = nowMs();
    this.pump();
  }

  /** Why the op cannot run (a root out of range, data of the wrong size), or null. */
  private invalid(op: SvcOp): string | null {
    const { size } = this.m.placed;
    for (const root of ['src', 'dst'] as const) {
      const needed = root === 'src' ? op.op === 'broadcast' || op.op === 'scatter' : op.op === 'reduce' || op.op === 'gather';
      const r = op[root];
      if (needed && (r === undefined || r >= size)) return `${op.op} needs ${root}, a rank of the group (0..${size - 1}), got ${r}`;
    }
    const elements = svcElements(op, this.m.rank, size).in;
    const bytes = elements * dist.elementSize(op.dtype as dist.DType);
    return op.op !== 'barrier' && bytes !== op.bytes ? `${op.op} of ${op.count} ${op.dtype} elements sends ${bytes} bytes from rank ${this.m.rank}, not ${op.bytes}` : null;
  }

  /** Runs the member's next op once all its data is here; one at a time, in the member's order. */
  private pump(): void {
    if (this.running || !this.takesOps) return;
    const q = this.queue.get(this.next);
    if (!q || !q.assembly.complete) return;
    this.queue.delete(this.next);
    this.next++;
    this.running = true;
    this.stats.begin(q.op);
    const startedMs = nowMs();
    this.execute(q).then(
      (out) => {
        this.running = false;
        this.stats.end(q.op);
        const timing = { receivedMs: q.receivedMs ?? startedMs, startedMs, endedMs: nowMs() };
        const result = { seq: q.op.seq, ok: true, bytes: out.byteLength, timing } satisfies SvcResult;
        // an op that completed is answered even after the group ended (a member left meanwhile)
        if (q.local && this.local?.connected) this.local.reply(result, out);
        else {
          this.publish(this.names.svc.result(this.groupId, this.m.rank), result);
          publishChunks(this.nc, this.names.svc.result(this.groupId, this.m.rank), q.op.seq, out);
        }
        this.pump();
      },
      (err: Error) => {
        this.running = false;
        this.stats.end(q.op, err);
        void this.fail(q.op, err);
      },
    );
  }

  private async execute(q: Queued): Promise<Uint8Array> {
    const { op } = q;
    const { size } = this.m.placed;
    const rank = this.m.rank;
    const timeout = op.timeoutMs;
    const dtype = op.dtype as dist.DType;
    const n = op.count;
    const es = dist.elementSize(dtype);
    const input = q.assembly.data;
    const redop = (op.redop ?? 'sum') as dist.ReduceOp;
    const outElements = svcElements(op, rank, size).out;
    // allReduce and broadcast (and reduce's dst) answer with their input: no result buffer for them
    const inPlace = op.op === 'allReduce' || op.op === 'broadcast' || (op.op === 'reduce' && rank === op.dst);
    const outBytes = inPlace ? new Uint8Array(0) : new Uint8Array(outElements * es);
    /** `elements` of `bytes` from element `at` on, as the library's tensor (no copy) */
    const view = (bytes: Uint8Array, elements: number, at = 0) => dist.viewAs(bytes.subarray(at * es, (at + elements) * es), dtype);
    // one rank's tensor in a buffer of one per rank
    const pieces = (bytes: Uint8Array) => Array.from({ length: size }, (_, r) => view(bytes, n, r * n));
    switch (op.op) {
      case 'allReduce':
        await dist.allReduce(view(input, n), { op: redop, timeout });
        return input;
      case 'broadcast':
        await dist.broadcast(view(input, n), { src: op.src!, timeout });
        return input;
      case 'reduce':
        await dist.reduce(view(input, n), { dst: op.dst!, op: redop, timeout });
        return rank === op.dst ? input : outBytes;
      case 'allGather':
        await dist.allGatherIntoTensor(view(outBytes, n * size), view(input, n), { timeout });
        return outBytes;
      case 'gather':
        await dist.gather(view(input, n), { dst: op.dst!, ...(rank === op.dst ? { gatherList: pieces(outBytes) } : {}), timeout });
        return outBytes;
      case 'scatter':
        await dist.scatter(view(outBytes, n), { src: op.src!, ...(rank === op.src ? { scatterList: pieces(input) } : {}), timeout });
        return outBytes;
      case 'reduceScatter':
        await dist.reduceScatterTensor(view(outBytes, n), view(input, n * size), { op: redop, timeout });
        return outBytes;
      case 'allToAll':
        await dist.allToAllSingle(view(outBytes, n * size), view(input, n * size), { timeout });
        return outBytes;
      case 'barrier':
        await dist.barrier({ timeout });
        return outBytes;
    }
  }

  /** An op failed here: the member gets the first cause (another's end notice, or this error), and the group ends. */
  private async fail(op: SvcOp, err: Error): Promise<void> {
    if (!this.ended && err instanceof dist.PeerFailureError) {
      // a peer's failure is the consequence of the first cause: give its end notice a moment to arrive
      const deadline = Date.now() + CAUSE_WAIT_MS;
      while (!this.ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    }
    const peers = (err as dist.CmeshError).context?.peers;
    const cause = this.ended?.error ?? { name: err.name, code: (err as dist.CmeshError).code, message: this.named(err), ...(peers?.length ? { peers } : {}) };
    this.publish(this.names.svc.result(this.groupId, this.m.rank), { seq: op.seq, ok: false, error: cause } satisfies SvcResult);
    if (!this.ended) await this.end({ groupId: this.groupId, reason: 'failed', rank: this.m.rank, error: cause, seq: op.seq });
  }

  /** The library's message, with the members behind the ranks it names. */
  private named(err: Error): string {
    const peers = (err as dist.CmeshError).context?.peers ?? [];
    const who = peers.map((r) => describe(this.m.placed.members, r, 'agent'));
    return who.length ? `${err.message} [${who.join('; ')}]` : err.message;
  }

  private onEnd(msg: Msg): void {
    const d = decodeMessage(SvcEndSchema, msg.data);
    if (d.ok && !this.ended) void this.finish(d.value);
  }

  /** Tells the group it is over and stops. */
  private async end(e: SvcEnd): Promise<void> {
    if (this.ended) return;
    this.publish(this.names.svc.end(this.groupId), e);
    await this.finish(e);
  }

  /** The group is over: nothing more is taken, and this process ends (its data-plane connections with it). */
  private async finish(e: SvcEnd): Promise<void> {
    if (this.ended) return;
    this.ended = e;
    this.liveness.stop();
    if (this.beat) clearInterval(this.beat);
    // a pending op's failure may still want to report this cause: let it, then go
    await new Promise((r) => setTimeout(r, CAUSE_WAIT_MS + 100));
    await this.nc.flush().catch(() => undefined);
    this.local?.close();
    process.exit(0);
  }

  private publish(subject: string, body: unknown): void {
    if (this.nc && !this.nc.isClosed()) this.nc.publish(subject, json.encode(body));
  }
}

if (!process.send) {
  console.error('member-worker is started by the rank agent (needs an IPC channel)');
  process.exit(2);
}
// The agent died or dropped us: stop at once (the others see this member's agent go silent).
process.on('disconnect', () => process.exit(1));
process.once('message', (m: ToMemberWorker) => {
  const w = new MemberWorker(m);
  w.start().catch(async (err: Error) => {
    console.error(`service group ${m.placed.groupId} rank ${m.rank} (worker ${process.pid}): ${err?.stack ?? err}`);
    await w.failStart(err).catch(() => undefined);
    process.exit(1);
  });
});
