// One service group's member on this agent, in a child process (the library's process group is
// process-global, and a broken group is ended by ending this process): takes the member's ops
// from NATS in its order, runs each with the library among the group's agents, on the backend the
// placement names (tcp; nccl through the agent's sidecar on its GPU), and sends the result back;
// heartbeats, watches everyone's, and ends the group for all when someone is lost or an op fails.
// Started by ServiceGroupWorkers with the placement and the group's secret over IPC. Every message on
// the group's subjects carries the group's MAC (GroupChannel): anything else is dropped and
// counted, never acted on; no message can throw into the NATS client or grow a buffer past its cap.
import * as dist from '@cmesh/collectives';
import { Assembly, EarlyChunks, GroupChannel, Liveness, PeerGate, SERVICE_GROUP_OUTAGE_MS, ServiceGroupDropReason, chunkOf, describe } from '@cmesh/client';
import {
  ClusterNames,
  SERVICE_GROUP_BYTES_LIMIT,
  SERVICE_GROUP_HEARTBEAT_MS,
  SERVICE_GROUP_LOST_MS,
  SERVICE_GROUP_MAX_BYTES,
  ServiceGroupEnd,
  ServiceGroupEndSchema,
  ServiceGroupKeys,
  ServiceGroupHeartbeatSchema,
  ServiceGroupOp,
  ServiceGroupOpSchema,
  ServiceGroupPlaced,
  ServiceGroupRankStatus,
  ServiceGroupResult,
  ServiceGroupStatusRequestSchema,
  clusterNames,
  serviceGroupElements,
  serviceGroupKeys,
} from '@cmesh/protocol';
import { connect } from '@nats-io/transport-node';
import { Msg, NatsConnection } from '@nats-io/nats-core';
import { natsInitMethod } from '../runners/tcp/nats-init-method';
import { FromMemberWorker, MemberOpStats } from './member-stats';
import { LocalServer } from './local-server';

export type ToMemberWorker = {
  type: 'start';
  placed: ServiceGroupPlaced;
  rank: number;
  /** the group's secret G (base64), from the agent's own events subject */
  secret: string;
  /** the process group's store prefix (nats:// init method) */
  storePrefix: string;
  natsUrl: string;
  cluster: string;
  /** for a group on nccl: the agent's GPU, and its sidecar's socket (or why the agent has none) */
  nccl: { device: number; socket?: string; reason?: string };
};

/** After an op failed here, how long to wait for the end notice that names the first cause. */
const CAUSE_WAIT_MS = 500;
/** Results kept to send again after an outage: the last this many ops, within this many bytes. */
const RESULTS_KEPT = 4;
const RESULTS_KEPT_BYTES = 64 * 1024 * 1024;
/** After a member left, how long its last ops may take to arrive here and run (or their own timeout, if longer). */
const LEFT_DRAIN_MS = 30_000;
/** How long the last messages may wait to be flushed before this process ends. */
const FLUSH_WAIT_MS = 2_000;
const INIT_TIMEOUT_MS = 60_000;
/**
 * The largest op's data or result this worker takes (CMESH_SVC_MAX_BYTES, default 1 GiB), and the
 * most its queue of announced ops may hold in all (4 such ops). Bigger is refused as a bad op.
 */
const MAX_BYTES = Math.min(Number(process.env.CMESH_SVC_MAX_BYTES) || SERVICE_GROUP_MAX_BYTES, SERVICE_GROUP_BYTES_LIMIT);
const MAX_QUEUED_BYTES = 4 * MAX_BYTES;
const MAX_QUEUED_OPS = 1024;
/** Chunks ahead of their op's header (NATS keeps the member's order, so only a misbehaving sender): at most this many ops and bytes. */
const EARLY_OPS = 8;
const EARLY_BYTES = 64 * 1024 * 1024;
/** How often the drops counted here go to the agent's metrics. */
const DROP_REPORT_MS = 1000;

interface Queued {
  op: ServiceGroupOp;
  assembly: Assembly;
  /** when its last byte arrived (wall clock, ms: see ServiceGroupTiming) */
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
  /** bytes of the ops in `queue` */
  private queuedBytes = 0;
  private readonly early = new EarlyChunks(EARLY_OPS, EARLY_BYTES);
  private next = 1;
  private running = false;
  private ended: ServiceGroupEnd | null = null;
  private liveness!: Liveness;
  /** results to the member after an outage wait until it is heard again */
  private toMember!: PeerGate;
  /** the last results sent over NATS, to send again when the member asks again (keepResult) */
  private readonly sentResults = new Map<number, { bytes: number; send: () => void }>();
  private beat: NodeJS.Timeout | null = null;
  private ready = false;
  /** the op running now and ops done: for the status subject, and the ops' reports to the agent (metrics) */
  private readonly stats: MemberOpStats;
  /** the member's local path (it shares this host), when offered */
  private local: LocalServer | null = null;
  private readonly keys: ServiceGroupKeys;
  private channel!: GroupChannel;
  /** heartbeats sent, and the last number heard per sender (a replay is ignored) */
  private beats = 0;
  private readonly heardN = new Map<string, number>();
  /** drops not yet reported to the agent, by subject kind and reason */
  private readonly drops = new Map<string, number>();
  private dropTimer: NodeJS.Timeout | null = null;

  constructor(private readonly m: ToMemberWorker) {
    this.keys = serviceGroupKeys(Buffer.from(m.secret, 'base64'));
    this.names = clusterNames(m.cluster);
    this.stats = new MemberOpStats(m.placed, m.rank, (r) => process.connected && process.send?.(r));
  }

  /** Loss judged while this worker's own connection is up; down past SERVICE_GROUP_OUTAGE_MS, the group ends naming the outage. */
  private watchLiveness(): void {
    const { placed, rank } = this.m;
    const conn = dist.watchConnection(this.nc);
    const onLost = (r: number, role: 'member' | 'agent') =>
      void this.end({ groupId: this.groupId, reason: 'lost', who: describe(placed.members, r, role), rank: r });
    const onOutage = () => {
      const err = conn.lost(
        `${describe(placed.members, rank, 'agent')}: group ${this.groupId} ended: NATS was unreachable for more than the ${SERVICE_GROUP_OUTAGE_MS / 1000} s a service group outlasts`,
      );
      if (err) void this.end({ groupId: this.groupId, reason: 'failed', rank, error: { name: err.name, code: err.code, message: err.message } });
    };
    this.liveness = new Liveness(placed.size, onLost, SERVICE_GROUP_LOST_MS, conn, onOutage);
    this.toMember = new PeerGate(conn);
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
    this.nc = await connect({
      ...dist.natsLogin(),
      ...dist.NATS_RECONNECT,
      servers: dist.natsServers(this.m.natsUrl),
      name: `cmesh-svc-${placed.groupId}-${rank}`,
    });
    this.watchLiveness();
    this.channel = new GroupChannel(this.nc, this.keys.mac, {
      label: `service group ${placed.groupId} rank ${rank} (agent)`,
      warn: (line) => console.error(line),
      onDrop: (what, reason) => this.countDrop(what, reason),
    });
    this.channel.subscribe(this.names.serviceGroups.op(placed.groupId, rank), 'op', (msg) => this.onOp(msg));
    this.channel.subscribe(this.names.serviceGroups.heartbeat(placed.groupId), 'hb', (msg) => this.onHeartbeat(msg));
    this.channel.subscribe(this.names.serviceGroups.end(placed.groupId), 'end', (msg) => this.onEnd(msg));
    this.channel.subscribe(this.names.serviceGroups.status(placed.groupId), 'status', (msg) => this.onStatus(msg));
    if (placed.members[rank]?.local) await this.offerLocal();
    const socket = this.local?.path;
    // times this worker's NATS connection came back since the group began (the heartbeat's `up`:
    // the member then sends its unanswered ops again)
    const watch = dist.watchConnection(this.nc);
    const reconnectsBefore = watch.reconnects;
    const heartbeat = () =>
      this.publish(this.names.serviceGroups.heartbeat(placed.groupId), {
        rank,
        role: 'agent',
        ready: this.ready,
        n: ++this.beats,
        up: watch.reconnects - reconnectsBefore,
        ...(socket ? { socket } : {}),
      });
    this.beat = setInterval(heartbeat, SERVICE_GROUP_HEARTBEAT_MS);
    // back from an outage: said at once, so the member sends again what it lost
    watch.onChange((up) => {
      if (up) heartbeat();
    });
    await dist.initProcessGroup({
      ...this.backendOptions(),
      initMethod: natsInitMethod(this.m.natsUrl, this.m.storePrefix),
      // derived from the group's secret: nothing secret is kept in the store bucket
      secret: this.keys.dataPlane,
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
    this.publish(this.names.serviceGroups.end(this.groupId), { groupId: this.groupId, reason: 'failed', rank: this.m.rank, error } satisfies ServiceGroupEnd);
    await this.nc.flush().catch(() => undefined);
  }

  /** The local path for a member on this host; without it (no shm addon, no socket) the member stays on NATS. */
  private async offerLocal(): Promise<void> {
    const server = new LocalServer(
      this.m.placed.members[this.m.rank].member,
      this.keys.local,
      // the member's segment grows by doubling to the largest op's data or result
      2 * MAX_BYTES,
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
  private status(): ServiceGroupRankStatus {
    const s = this.stats.status(this.queue.size);
    if (!this.ready) return s;
    const backend = dist.getBackend();
    return { ...s, backend, ...(backend === 'nccl' ? { device: this.m.nccl.device } : {}) };
  }

  private onHeartbeat(msg: Msg): void {
    const hb = this.channel.decode('hb', ServiceGroupHeartbeatSchema, msg);
    if (!hb) return;
    if (hb.n !== undefined) {
      const who = `${hb.role}:${hb.rank}`;
      if (hb.n <= (this.heardN.get(who) ?? 0)) return this.channel.drop('hb', 'duplicate', `${who}'s heartbeat ${hb.n} again`);
      this.heardN.set(who, hb.n);
    }
    this.liveness.heard(hb);
    if (hb.role === 'member' && hb.rank === this.m.rank) this.toMember.heard();
  }

  /** The coordinator's status request (GET /service-groups/{name}): answered on the reply subject its MAC covers. */
  private onStatus(msg: Msg): void {
    const req = this.channel.decode('status', ServiceGroupStatusRequestSchema, msg);
    if (!req) return;
    if (!msg.reply || req.reply !== msg.reply) return this.channel.drop('status', 'invalid', 'a status request whose reply subject is not the one it names');
    this.channel.respond(msg, this.status());
  }

  private onOp(msg: Msg): void {
    if (!this.takesOps) return;
    const chunk = chunkOf(msg);
    if (chunk) {
      const q = this.queue.get(chunk.seq);
      if (!q) {
        // an op that ran already (a replay), or one not announced yet: kept within the caps
        if (chunk.seq < this.next) return this.channel.drop('op', 'duplicate', `a chunk of op #${chunk.seq}, which ran`);
        if (!this.early.add(chunk.seq, chunk.offset, msg.data))
          this.channel.drop('op', 'over_limit', `a chunk of op #${chunk.seq} before its header, beyond ${EARLY_OPS} ops or ${EARLY_BYTES} bytes`);
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
    const op = this.channel.decode('op', ServiceGroupOpSchema, msg);
    if (op) this.take(op);
    else {
      // authentic (the member's own) but malformed: it fails, so the member is not left waiting
      const seq = seqOf(msg.data);
      if (seq !== undefined && seq >= this.next && !this.queue.has(seq))
        void this.fail({ seq } as ServiceGroupOp, new dist.InvalidArgumentError(`op #${seq}: not a valid op`));
    }
  }

  /** A member's op: from NATS (its data follows in chunks), or by the local path with its data (`filled`). */
  private take(op: ServiceGroupOp, filled?: Uint8Array): void {
    if (!this.takesOps) return;
    // the member sends an op again after an outage when no result came: the result goes again
    const again = this.sentResults.get(op.seq);
    if (again && !filled) return this.toMember.send(again.send);
    // within a round any other duplicate is a replay of what the member sent: harmless, ignored
    if (op.seq < this.next || this.queue.has(op.seq)) return this.channel.drop('op', 'duplicate', `op #${op.seq} again`);
    const bad = this.invalid(op);
    if (bad) return void this.fail(op, new dist.InvalidArgumentError(`op #${op.seq}: ${bad}`));
    const q: Queued = { op, assembly: new Assembly(op.bytes, filled), local: filled !== undefined };
    this.queue.set(op.seq, q);
    this.queuedBytes += filled ? 0 : op.bytes;
    for (const e of this.early.take(op.seq)) q.assembly.add(e.offset, e.data);
    if (q.assembly.complete) q.receivedMs = nowMs();
    this.pump();
  }

  /** Why the op cannot run (a root out of range, data of the wrong size), or null. */
  private invalid(op: ServiceGroupOp): string | null {
    const { size } = this.m.placed;
    for (const root of ['src', 'dst'] as const) {
      const needed = root === 'src' ? op.op === 'broadcast' || op.op === 'scatter' : op.op === 'reduce' || op.op === 'gather';
      const r = op[root];
      if (needed && (r === undefined || r >= size)) return `${op.op} needs ${root}, a rank of the group (0..${size - 1}), got ${r}`;
    }
    const { in: inElements, out: outElements } = serviceGroupElements(op, this.m.rank, size);
    const es = dist.elementSize(op.dtype as dist.DType);
    const bytes = inElements * es;
    if (op.op !== 'barrier' && bytes !== op.bytes)
      return `${op.op} of ${op.count} ${op.dtype} elements sends ${bytes} bytes from rank ${this.m.rank}, not ${op.bytes}`;
    // what the op allocates here: its data and its result (allGather's is size times the data)
    const most = Math.max(bytes, outElements * es);
    if (most > MAX_BYTES)
      return `${op.op} of ${op.count} ${op.dtype} elements needs ${most} bytes on the agent, more than the ${MAX_BYTES} an op may have (CMESH_SVC_MAX_BYTES)`;
    if (this.queue.size >= MAX_QUEUED_OPS) return `${MAX_QUEUED_OPS} ops are queued already`;
    if (this.queuedBytes + op.bytes > MAX_QUEUED_BYTES) return `the queued ops hold ${this.queuedBytes} bytes; ${op.bytes} more is over ${MAX_QUEUED_BYTES}`;
    return null;
  }

  /** Runs the member's next op once all its data is here; one at a time, in the member's order. */
  private pump(): void {
    if (this.running || !this.takesOps) return;
    const q = this.queue.get(this.next);
    if (!q || !q.assembly.complete) return;
    this.queue.delete(this.next);
    if (!q.local) this.queuedBytes -= q.op.bytes;
    this.next++;
    this.early.dropBefore(this.next);
    this.running = true;
    this.stats.begin(q.op);
    const startedMs = nowMs();
    this.execute(q).then(
      (out) => {
        this.running = false;
        this.stats.end(q.op);
        const timing = { receivedMs: q.receivedMs ?? startedMs, startedMs, endedMs: nowMs() };
        const result = { seq: q.op.seq, ok: true, bytes: out.byteLength, timing } satisfies ServiceGroupResult;
        // an op that completed is answered even after the group ended (a member left meanwhile)
        if (q.local && this.local?.connected) this.local.reply(result, out);
        else {
          // after an outage, once the member is heard again (it re-subscribed)
          this.toMember.send(
            this.keepResult(q.op.seq, out.byteLength, out, (data) => {
              this.publish(this.names.serviceGroups.result(this.groupId, this.m.rank), result);
              this.channel.chunks(this.names.serviceGroups.result(this.groupId, this.m.rank), q.op.seq, data);
            }),
          );
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
    const outElements = serviceGroupElements(op, rank, size).out;
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
  private async fail(op: ServiceGroupOp, err: Error): Promise<void> {
    if (!this.ended && err instanceof dist.PeerFailureError) {
      // a peer's failure is the consequence of the first cause: give its end notice a moment to arrive
      const deadline = Date.now() + CAUSE_WAIT_MS;
      while (!this.ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    }
    const peers = (err as dist.CmeshError).context?.peers;
    const cause = this.ended?.error ?? { name: err.name, code: (err as dist.CmeshError).code, message: this.named(err), ...(peers?.length ? { peers } : {}) };
    this.toMember.send(
      this.keepResult(op.seq, 0, new Uint8Array(0), () =>
        this.publish(this.names.serviceGroups.result(this.groupId, this.m.rank), { seq: op.seq, ok: false, error: cause } satisfies ServiceGroupResult),
      ),
    );
    if (!this.ended) await this.end({ groupId: this.groupId, reason: 'failed', rank: this.m.rank, error: cause, seq: op.seq });
  }

  /**
   * The send of an op's result, kept to send again (a copy of its data) for the last
   * RESULTS_KEPT ops within RESULTS_KEPT_BYTES: an outage may lose it on the way to the member.
   */
  private keepResult(seq: number, bytes: number, data: Uint8Array, publish: (data: Uint8Array) => void): () => void {
    const send = () => publish(data);
    if (bytes > RESULTS_KEPT_BYTES) return send;
    const copy = data.slice();
    this.sentResults.set(seq, { bytes, send: () => publish(copy) });
    // newest first: the first RESULTS_KEPT within the bytes stay
    let total = 0;
    let kept = 0;
    for (const [s, r] of [...this.sentResults].reverse()) {
      total += r.bytes;
      if (total > RESULTS_KEPT_BYTES || ++kept > RESULTS_KEPT) this.sentResults.delete(s);
    }
    return send;
  }

  /** The library's message, with the members behind the ranks it names. */
  private named(err: Error): string {
    const peers = (err as dist.CmeshError).context?.peers ?? [];
    const who = peers.map((r) => describe(this.m.placed.members, r, 'agent'));
    return who.length ? `${err.message} [${who.join('; ')}]` : err.message;
  }

  private onEnd(msg: Msg): void {
    const e = this.channel.decode('end', ServiceGroupEndSchema, msg);
    if (!e || this.ended) return;
    if (e.groupId !== this.groupId) return this.channel.drop('end', 'invalid', `an end of group ${JSON.stringify(e.groupId)}`);
    void this.finish(e);
  }

  /** Counts a drop for the agent's metrics (sent in batches, not one IPC message per drop). */
  private countDrop(what: string, reason: ServiceGroupDropReason): void {
    const key = `${what}\n${reason}`;
    this.drops.set(key, (this.drops.get(key) ?? 0) + 1);
    this.dropTimer ??= setTimeout(() => this.reportDrops(), DROP_REPORT_MS);
  }

  private reportDrops(): void {
    this.dropTimer = null;
    for (const [key, count] of this.drops) {
      const [what, reason] = key.split('\n');
      const r: FromMemberWorker = { type: 'service-group-dropped', subject: `${this.names.serviceGroups.groupWildcard.slice(0, -1)}*.${what}`, reason, count };
      if (process.connected) process.send?.(r);
    }
    this.drops.clear();
  }

  /** Tells the group it is over and stops. */
  private async end(e: ServiceGroupEnd): Promise<void> {
    if (this.ended) return;
    this.publish(this.names.serviceGroups.end(this.groupId), e);
    await this.finish(e);
  }

  /** The group is over: nothing more is taken, and this process ends (its data-plane connections with it). */
  private async finish(e: ServiceGroupEnd): Promise<void> {
    if (this.ended) return;
    this.ended = e;
    this.liveness.stop();
    if (this.beat) clearInterval(this.beat);
    if (e.reason === 'left' && e.seq) await this.drainThrough(e.seq);
    // a pending op's failure may still want to report this cause: let it, then go
    await new Promise((r) => setTimeout(r, CAUSE_WAIT_MS + 100));
    // NATS may be down (the outage that ended the group): what is buffered goes if it comes back soon
    await Promise.race([this.nc.flush().catch(() => undefined), new Promise((r) => setTimeout(r, FLUSH_WAIT_MS).unref())]);
    this.reportDrops();
    this.stats.flush();
    this.local?.close();
    process.exit(0);
  }

  /**
   * A member left after its op `seq`: this rank's ops up to it run (the leaver sent its part of
   * each), within their own timeouts, while our member may still be sending its side.
   */
  private async drainThrough(seq: number): Promise<void> {
    const begun = Date.now();
    let timeoutMs = LEFT_DRAIN_MS;
    while ((this.next <= seq || this.running) && Date.now() - begun < timeoutMs) {
      for (const q of this.queue.values()) timeoutMs = Math.max(timeoutMs, q.op.timeoutMs);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private publish(subject: string, body: unknown): void {
    if (this.channel) this.channel.json(subject, body);
  }
}

/** The `seq` of a malformed op header, when it has one (guarded: any bytes may come). */
function seqOf(data: Uint8Array): number | undefined {
  try {
    const seq = (JSON.parse(Buffer.from(data).toString('utf8')) as { seq?: unknown } | null)?.seq;
    return typeof seq === 'number' && Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
  } catch {
    return undefined;
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
