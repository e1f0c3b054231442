// One member's side of a placed service group: its ops go to its agent in order (a JSON header,
// then the data in chunks), results come back the same way, and the group ends for everyone when a
// member leaves, a member or agent is lost, or an op fails: pending and later ops then fail with
// the library's typed error naming who. Every message of the group carries the group's MAC
// (GroupChannel): what a stranger publishes on the group's subjects is dropped and counted.
import { Msg, NatsConnection, Subscription } from '@nats-io/nats-core';
import {
  ClusterNames,
  SERVICE_GROUP_HEARTBEAT_MS,
  SERVICE_GROUP_LOST_MS,
  SERVICE_GROUP_MAX_BYTES,
  ServiceGroupEnd,
  ServiceGroupEndSchema,
  ServiceGroupError,
  ServiceGroupKeys,
  ServiceGroupHeartbeat,
  ServiceGroupHeartbeatSchema,
  ServiceGroupOp,
  ServiceGroupPlaced,
  ServiceGroupResult,
  ServiceGroupResultSchema,
  ServiceGroupBackend,
  ServiceGroupTiming,
  serviceGroupElements,
  serviceGroupKeys,
} from '@cmesh/protocol';
import { DType, REDUCE_OPS, ReduceOp, elementSize } from '@cmesh/collectives/names';
import {
  BackendUnsupportedError,
  CmeshError,
  CollectiveMismatchError,
  DistTimeoutError,
  ErrorContext,
  InvalidArgumentError,
  NatsConnectionLostError,
  PeerFailureError,
} from '@cmesh/collectives/errors';
import { ConnectionWatch, watchConnection } from '@cmesh/collectives/nats-login';
import { Assembly, chunkOf } from './chunks';
import { GroupChannel, ServiceGroupDropReason } from './group-channel';
import { LocalLink } from './local-link';
import { Liveness, Role, SERVICE_GROUP_OUTAGE_MS, describe } from './liveness';
import { PeerGate } from './peer-gate';
import { ServiceTensor, bytesOf, dtypeOfTensor } from './tensor';

const SERVICE_GROUP_LOST_ABOUT = `${SERVICE_GROUP_LOST_MS / 1000} s`;

/** Every op's default deadline, as the agents apply it (ms). */
export const DEFAULT_OP_TIMEOUT_MS = 60_000;
/** After the agents' deadline, how long this member still waits for their answer. */
const CLIENT_GRACE_MS = 5_000;
/**
 * How long ops of ours still wait for results already on their way: after another member left,
 * or, when an op failed, the ops before it (they ran; their results come from our agent, the
 * failure's notice perhaps from another, sooner). As long as the grace after the agents'
 * deadline: on a loaded host a result through NATS can trail a member's leave by over a second.
 */
const RESULT_GRACE_MS = CLIENT_GRACE_MS;

export interface OpOptions {
  /** the op's deadline, ms (default 60 s); `timeout` as in the library's options */
  timeout?: number;
  /** @deprecated `timeout`'s earlier name, still taken */
  timeoutMs?: number;
  /** float16 / bfloat16 for a Uint16Array of bits */
  dtype?: DType;
}

/**
 * The deadline an op or a join was given: `timeout`, as the library's options name it, or
 * `timeoutMs`, its earlier name here (undefined when neither).
 */
export function timeoutOf(opts: { timeout?: number; timeoutMs?: number } | undefined): number | undefined {
  const { timeout, timeoutMs } = opts ?? {};
  if (timeout !== undefined && timeoutMs !== undefined && timeout !== timeoutMs)
    throw new InvalidArgumentError(`timeout ${timeout} and timeoutMs ${timeoutMs}: give timeout only (timeoutMs is its earlier name)`);
  return timeout ?? timeoutMs;
}

const ERRORS: Record<string, (m: string, c: ErrorContext, backend: ServiceGroupBackend) => CmeshError> = {
  DistTimeoutError: (m, c) => new DistTimeoutError(m, c),
  // another participant's outage: the servers and duration are in its message
  NatsConnectionLostError: (m, c) => new NatsConnectionLostError(m, [], 0, c),
  PeerFailureError: (m, c) => new PeerFailureError(m, c),
  CollectiveMismatchError: (m, c) => new CollectiveMismatchError(m, c),
  InvalidArgumentError: (m, c) => new InvalidArgumentError(m, c),
  BackendUnsupportedError: (m, c, backend) => new BackendUnsupportedError(m, backend, c),
};

/** NCCL has no bitwise reductions (torch: "Cannot use ReduceOp.BAND with NCCL"). */
const NCCL_LACKS: readonly ReduceOp[] = ['band', 'bor', 'bxor'];

/** The library's error class for an error that came over the wire (CmeshError for others, its name and code kept). */
export function typedError(e: ServiceGroupError, ctx: ErrorContext, backend: ServiceGroupBackend = 'tcp'): CmeshError {
  const context = e.peers?.length ? { ...ctx, peers: e.peers } : ctx;
  const make = ERRORS[e.name];
  if (make) return make(e.message, context, backend);
  const err = new CmeshError(e.message, context);
  // the class this side has no constructor for (NcclError, NcclUnavailableError, …): its name and code
  err.name = e.name;
  if (e.code) Object.assign(err, { code: e.code });
  return err;
}

/** What one op sends: the dtype and element count of one rank's tensor, and the bytes that follow. */
interface Payload {
  dtype: DType;
  count: number;
  data: Uint8Array;
  /** `data` is a buffer of the op's own (packed), not a view of the caller's tensor */
  owned?: boolean;
}

function redop(op: ReduceOp | undefined): ReduceOp {
  const r = op ?? 'sum';
  if (!(REDUCE_OPS as readonly string[]).includes(r)) throw new InvalidArgumentError(`unknown reduce op ${JSON.stringify(r)} (${REDUCE_OPS.join(', ')})`);
  return r;
}

/** One buffer of the tensors, in rank order. */
function pack(tensors: ServiceTensor[]): Uint8Array {
  const out = new Uint8Array(tensors.reduce((n, t) => n + t.byteLength, 0));
  let at = 0;
  for (const t of tensors) {
    out.set(bytesOf(t), at);
    at += t.byteLength;
  }
  return out;
}

/** The buffer's consecutive pieces into the tensors. */
function unpack(data: Uint8Array, tensors: ServiceTensor[]): void {
  let at = 0;
  for (const t of tensors) {
    bytesOf(t).set(data.subarray(at, at + t.byteLength));
    at += t.byteLength;
  }
}

/**
 * Where one op's time went, as wall-clock ms with a fraction (performance.timeOrigin +
 * performance.now(); comparable with the agent's when both run on one host): called, its data
 * handed to the connection (sent), the agent's ServiceGroupTiming, and the result complete here (done).
 */
export interface OpTiming extends ServiceGroupTiming {
  calledMs: number;
  sentMs: number;
  doneMs: number;
}

const nowMs = () => performance.timeOrigin + performance.now();

interface Pending {
  seq: number;
  calledMs: number;
  sentMs?: number;
  timing?: ServiceGroupTiming;
  op: ServiceGroupOp['op'];
  resolve: (data: Uint8Array) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  /** the result's size: serviceGroupElements(op).out of the op's dtype */
  outBytes: number;
  assembly?: Assembly;
  /** result chunks before the result's header: at most outBytes in all */
  early: { offset: number; data: Uint8Array }[];
  earlyBytes: number;
  /** sends the op over NATS again (its header and data): after an outage, while no result came */
  resend?: () => void;
}

export interface ServiceGroupOptions {
  /** false: the data over NATS even on the agent's host */
  local?: boolean;
  /** the largest op's data or result this member sends or takes (default SERVICE_GROUP_MAX_BYTES, 1 GiB) */
  maxBytes?: number;
  /** where dropped messages are reported (rate-limited; default: console.warn) */
  warn?: (line: string) => void;
}

/** How long leave() waits for its notice to be flushed (NATS may be down). */
const LEAVE_FLUSH_MS = 2_000;

/** How long opening the local path may take before the member stays on NATS. */
const LOCAL_OPEN_MS = 5_000;

export class ServiceGroup {
  readonly rank: number;
  readonly size: number;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private ended: CmeshError | null = null;
  private readonly subs: Subscription[] = [];
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly liveness: Liveness;
  private readyAgents = new Set<number>();
  private onReady: (() => void) | null = null;
  private onEnded: ((e: Error) => void) | null = null;
  /** After a member left: the last op it took part in, which we may still send and complete */
  private keptThrough = 0;
  /** the last op that completed: where its time went (null before the first, or when the agent sent no timing) */
  lastTiming: OpTiming | null = null;
  /** the local path to the agent (a Unix socket and shared memory), when open */
  private link: LocalLink | null = null;
  private agentSocket: string | undefined;
  /** why the local path is not used (null when it is) */
  localUnused: string | null = 'not tried';
  /** settles when the last local op settled: ops use the shared segment one at a time */
  private localTail: Promise<void> = Promise.resolve();
  private localQueued = 0;
  private readonly keys: ServiceGroupKeys;
  private readonly channel: GroupChannel;
  /** heartbeats sent (each carries the next number) and the last number heard per sender: a replay is ignored */
  private beats = 0;
  private readonly heardN = new Map<string, number>();
  private readonly conn: ConnectionWatch;
  /** ops to our agent after an outage wait until it is heard again */
  private readonly toAgent: PeerGate;

  /** `secret`: the group's secret G, as the coordinator sealed it for this member */
  constructor(
    private readonly nc: NatsConnection,
    private readonly names: ClusterNames,
    readonly placed: ServiceGroupPlaced,
    rank: number,
    secret: Uint8Array,
    private readonly opts: ServiceGroupOptions = {},
  ) {
    this.rank = rank;
    this.size = placed.size;
    this.conn = watchConnection(nc);
    this.toAgent = new PeerGate(this.conn, () => this.resendUnanswered());
    this.liveness = new Liveness(
      this.size,
      (r, role) => this.lost(r, role),
      SERVICE_GROUP_LOST_MS,
      this.conn,
      () => this.outage(),
    );
    this.keys = serviceGroupKeys(secret);
    this.channel = new GroupChannel(nc, this.keys.mac, {
      label: `service group ${placed.groupId} rank ${rank} (member)`,
      warn: opts.warn ?? ((l) => console.warn(l)),
    });
  }

  /** Messages on this group's subjects dropped here, by reason (bad_mac: not from the group). */
  get dropped(): Readonly<Partial<Record<ServiceGroupDropReason, number>>> {
    return this.channel.dropped;
  }

  get groupId(): string {
    return this.placed.groupId;
  }

  /** Subscribes, heartbeats, and resolves once every agent of the group said its process group is up. */
  async start(timeoutMs: number): Promise<void> {
    const g = this.placed.groupId;
    this.subs.push(
      this.channel.subscribe(this.names.serviceGroups.result(g, this.rank), 'res', (m) => this.onResult(m)),
      this.channel.subscribe(this.names.serviceGroups.heartbeat(g), 'hb', (m) => this.onHeartbeat(m)),
      this.channel.subscribe(this.names.serviceGroups.end(g), 'end', (m) => this.onEnd(m)),
    );
    const beat = () =>
      this.publish(this.names.serviceGroups.heartbeat(g), { rank: this.rank, role: 'member', n: ++this.beats } satisfies ServiceGroupHeartbeat);
    beat();
    this.heartbeat = setInterval(beat, SERVICE_GROUP_HEARTBEAT_MS);
    this.heartbeat.unref();
    // a server restarting rejects the flush ("disconnect"); the subscriptions go again on the
    // reconnect, and the wait for the agents below has its own deadline
    await this.nc.flush().catch(() => undefined);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const missing = [...Array(this.size).keys()].filter((r) => !this.readyAgents.has(r));
        const ctx = { group: g, rank: this.rank, peers: missing };
        const err =
          this.conn.lost(`group ${g}: agents of ranks ${missing.join(', ')} not ready within ${timeoutMs} ms`, ctx) ??
          new DistTimeoutError(`group ${g}: agents of ranks ${missing.join(', ')} not ready within ${timeoutMs} ms`, ctx);
        this.end({ groupId: this.groupId, reason: 'failed', error: { name: err.name, message: err.message } }, err);
        reject(err);
      }, timeoutMs);
      this.onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      this.onEnded = (e) => {
        clearTimeout(timer);
        reject(e);
      };
      if (this.readyAgents.size === this.size) this.onReady();
    });
    this.onReady = this.onEnded = null;
    this.liveness.start();
    await this.openLocal(Math.min(LOCAL_OPEN_MS, timeoutMs));
  }

  /** The library backend the group's agents run its ops with (the placement's choice). */
  get backend(): ServiceGroupBackend {
    return this.placed.backend ?? 'tcp';
  }

  /** A reduce op the group's backend has; on nccl a bitwise one is refused here, before anything is sent (torch refuses it too). */
  private reduceOp(op: ReduceOp | undefined, what: ServiceGroupOp['op']): ReduceOp {
    const r = redop(op);
    if (this.backend === 'nccl' && NCCL_LACKS.includes(r)) {
      const has = REDUCE_OPS.filter((x) => !NCCL_LACKS.includes(x)).join(', ');
      throw new BackendUnsupportedError(`${what}: ReduceOp.${r.toUpperCase()} (it has ${has}) is not supported by the nccl backend`, 'nccl', {
        op: what,
        group: this.groupId,
        rank: this.rank,
      });
    }
    return r;
  }

  /** How this member's data reaches its agent: 'local' (Unix socket and shared memory) or 'nats'. */
  get transport(): 'local' | 'nats' {
    return this.link ? 'local' : 'nats';
  }

  /** The local path when this member shares its agent's host and the agent offers it; else NATS stays. */
  private async openLocal(timeoutMs: number): Promise<void> {
    if (this.opts.local === false) return void (this.localUnused = 'turned off (local: false)');
    if (!this.placed.members[this.rank]?.local) return void (this.localUnused = 'the agent is on another host');
    if (!this.agentSocket) return void (this.localUnused = 'the agent offers no local socket');
    const opened = await LocalLink.open(
      this.agentSocket,
      this.placed.members[this.rank].member,
      this.keys.local,
      timeoutMs,
      (r) => this.onResultHeader(r, true),
      () => (this.link = null),
    );
    if ('why' in opened) this.localUnused = opened.why;
    else {
      this.link = opened.link;
      this.localUnused = null;
    }
  }

  /** Reduces `tensor` across the group in place (op: sum, avg, product, min, max; band, bor, bxor on tcp). */
  async allReduce(tensor: ServiceTensor, opts: OpOptions & { op?: ReduceOp } = {}): Promise<void> {
    const out = await this.run('allReduce', this.one(tensor, opts), opts, { redop: this.reduceOp(opts.op, 'allReduce') });
    bytesOf(tensor).set(out);
  }

  /** Every member's `tensor` becomes rank `src`'s. */
  async broadcast(tensor: ServiceTensor, opts: OpOptions & { src: number }): Promise<void> {
    const out = await this.run('broadcast', this.one(tensor, opts), opts, { src: this.root(opts?.src, 'src') });
    bytesOf(tensor).set(out);
  }

  /** Rank `dst`'s `tensor` becomes the reduction of every member's; the others' stay as they are. */
  async reduce(tensor: ServiceTensor, opts: OpOptions & { dst: number; op?: ReduceOp }): Promise<void> {
    const out = await this.run('reduce', this.one(tensor, opts), opts, { dst: this.root(opts?.dst, 'dst'), redop: this.reduceOp(opts.op, 'reduce') });
    if (out.byteLength) bytesOf(tensor).set(out);
  }

  /** `outputList[r]` gets rank r's `tensor` (torch's all_gather: one tensor like `tensor` per rank). */
  async allGather(outputList: ServiceTensor[], tensor: ServiceTensor, opts: OpOptions = {}): Promise<void> {
    const t = this.one(tensor, opts);
    this.list(outputList, t, opts, 'outputList');
    const out = await this.run('allGather', t, opts, {});
    unpack(out, outputList);
  }

  /** Rank `dst` gets every member's `tensor` in `gatherList[r]`; only `dst` passes a gatherList (torch's gather). */
  async gather(tensor: ServiceTensor, opts: OpOptions & { dst: number; gatherList?: ServiceTensor[] }): Promise<void> {
    const t = this.one(tensor, opts);
    const dst = this.root(opts?.dst, 'dst');
    if (this.rank === dst) this.list(opts.gatherList, t, opts, 'gatherList');
    else if (opts.gatherList?.length) throw new InvalidArgumentError('gather: gatherList must NOT be specified on non-destination ranks');
    const out = await this.run('gather', t, opts, { dst });
    if (this.rank === dst) unpack(out, opts.gatherList!);
  }

  /** Each member's `tensor` becomes `scatterList[rank]` of rank `src`; only `src` passes a scatterList (torch's scatter). */
  async scatter(tensor: ServiceTensor, opts: OpOptions & { src: number; scatterList?: ServiceTensor[] }): Promise<void> {
    const t = this.one(tensor, opts);
    const src = this.root(opts?.src, 'src');
    let data: Uint8Array = new Uint8Array(0);
    if (this.rank === src) data = pack(this.list(opts.scatterList, t, opts, 'scatterList'));
    else if (opts.scatterList?.length) throw new InvalidArgumentError('scatter: scatterList must NOT be specified on non-source ranks');
    const out = await this.run('scatter', { ...t, data, owned: true }, opts, { src });
    bytesOf(tensor).set(out);
  }

  /** `output` gets the reduction of every member's `inputList[rank]` (torch's reduce_scatter). */
  async reduceScatter(output: ServiceTensor, inputList: ServiceTensor[], opts: OpOptions & { op?: ReduceOp } = {}): Promise<void> {
    const t = this.one(output, opts);
    const r = this.reduceOp(opts.op, 'reduceScatter');
    const out = await this.run('reduceScatter', { ...t, data: pack(this.list(inputList, t, opts, 'inputList')), owned: true }, opts, { redop: r });
    bytesOf(output).set(out);
  }

  /** `outputList[r]` gets rank r's `inputList[rank]` (torch's all_to_all, every tensor of one size). */
  async allToAll(outputList: ServiceTensor[], inputList: ServiceTensor[], opts: OpOptions = {}): Promise<void> {
    if (!Array.isArray(inputList) || !inputList.length)
      throw new InvalidArgumentError(`inputList must hold ${this.size} tensors (one per rank), got ${inputList?.length}`);
    const t = this.one(inputList[0], opts);
    const data = pack(this.list(inputList, t, opts, 'inputList'));
    this.list(outputList, t, opts, 'outputList');
    unpack(await this.run('allToAll', { ...t, data, owned: true }, opts, {}), outputList);
  }

  /** Returns when every member called it. */
  async barrier(opts: Pick<OpOptions, 'timeout' | 'timeoutMs'> = {}): Promise<void> {
    await this.run('barrier', { dtype: 'uint8', count: 0, data: new Uint8Array(0) }, opts, {});
  }

  /** One rank's tensor: its dtype, element count and bytes (a view). */
  private one(tensor: ServiceTensor, opts: OpOptions): Payload {
    const dtype = dtypeOfTensor(tensor, opts?.dtype);
    return { dtype, count: tensor.length, data: bytesOf(tensor) };
  }

  /** A list of one tensor per rank, each of `like`'s dtype and length. */
  private list(tensors: ServiceTensor[] | undefined, like: Payload, opts: OpOptions, what: string): ServiceTensor[] {
    if (!Array.isArray(tensors) || tensors.length !== this.size)
      throw new InvalidArgumentError(`${what} must hold ${this.size} tensors (one per rank), got ${tensors?.length}`);
    tensors.forEach((o, r) => {
      if (dtypeOfTensor(o, opts.dtype) !== like.dtype || o.length !== like.count)
        throw new InvalidArgumentError(`${what}[${r}] must be a ${like.dtype} tensor of ${like.count} elements`);
    });
    return tensors;
  }

  private root(r: number | undefined, what: 'src' | 'dst'): number {
    if (!Number.isInteger(r) || r! < 0 || r! >= this.size) throw new InvalidArgumentError(`${what} ${r} is not a rank of this group (0..${this.size - 1})`);
    return r!;
  }

  /** Leaves the group: it ends for every member (their pending ops fail naming this one). */
  async leave(): Promise<void> {
    if (!this.ended) {
      const who = describe(this.placed.members, this.rank, 'member');
      // the others' ops up to our last one still complete: we sent our part of each
      const notice: ServiceGroupEnd = { groupId: this.groupId, reason: 'left', who, rank: this.rank, ...(this.seq ? { seq: this.seq } : {}) };
      this.end(notice, new PeerFailureError(`${who} left the group`, { group: this.groupId, rank: this.rank }));
    }
    // NATS down: the leave goes out if it is back within LEAVE_FLUSH_MS; leave() never hangs on it
    await Promise.race([this.nc.flush().catch(() => undefined), new Promise((r) => setTimeout(r, LEAVE_FLUSH_MS).unref())]);
    this.close();
  }

  private async run(op: ServiceGroupOp['op'], { dtype, count, data, owned }: Payload, opts: OpOptions, extra: Partial<ServiceGroupOp>): Promise<Uint8Array> {
    const timeoutMs = timeoutOf(opts) ?? DEFAULT_OP_TIMEOUT_MS;
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new InvalidArgumentError(`timeout must be a positive integer (ms), got ${timeoutMs}`);
    // after a member left, only the ops it took part in may still be sent
    if (this.ended && this.seq >= this.keptThrough) throw this.ended;
    const header: ServiceGroupOp = { seq: this.seq + 1, op, dtype, count, timeoutMs, bytes: data.byteLength, ...extra };
    const outBytes = serviceGroupElements(header, this.rank, this.size).out * elementSize(dtype);
    const max = this.opts.maxBytes ?? SERVICE_GROUP_MAX_BYTES;
    if (Math.max(data.byteLength, outBytes) > max)
      throw new InvalidArgumentError(`${op}: ${Math.max(data.byteLength, outBytes)} bytes of data or result, more than the ${max} an op may have (maxBytes)`);
    const seq = ++this.seq;
    const calledMs = nowMs();
    const subject = this.names.serviceGroups.op(this.groupId, this.rank);
    return new Promise<Uint8Array>((resolve, reject) => {
      const fail = (err: CmeshError) => this.end({ groupId: this.groupId, reason: 'failed', error: { name: err.name, message: err.message } }, err);
      // at the op's deadline with NATS down, the agents' answer cannot come: the outage is the reason, now
      const timer = setTimeout(() => {
        const down = this.conn.lost(`${op} #${seq} on group ${this.groupId}: deadline of ${timeoutMs} ms passed`, this.context(op, seq));
        if (down) return fail(down);
        p.timer = setTimeout(() => {
          const what = `${op} #${seq} on group ${this.groupId}: no answer from ${describe(this.placed.members, this.rank, 'agent')} within ${timeoutMs + CLIENT_GRACE_MS} ms`;
          fail(this.conn.lost(what, this.context(op, seq)) ?? new DistTimeoutError(what, this.context(op, seq)));
        }, CLIENT_GRACE_MS);
      }, timeoutMs);
      const p: Pending = { seq, calledMs, op, resolve, reject, timer, outBytes, early: [], earlyBytes: 0 };
      this.pending.set(seq, p);
      if (this.link) return this.sendLocal(p, header, data);
      // the caller's tensor is copied: it may change while chunks wait in the connection's buffer
      const bytes = owned ? data : data.slice();
      const send = () => {
        this.publish(subject, header);
        this.channel.chunks(subject, seq, bytes);
      };
      this.toAgent.send(() => {
        send();
        p.sentMs = nowMs();
        p.resend = send;
      });
    });
  }

  /** The op through the shared segment, after the op before it settled (they share the segment). */
  private sendLocal(p: Pending, header: ServiceGroupOp, data: Uint8Array): void {
    const link = this.link!;
    const { out } = serviceGroupElements(header, this.rank, this.size);
    const need = Math.max(data.byteLength, out * elementSize(header.dtype as DType), 1);
    const prev = this.localTail;
    let release!: () => void;
    this.localTail = new Promise<void>((r) => (release = r));
    const { resolve, reject } = p;
    const done = () => {
      this.localQueued--;
      release();
    };
    p.resolve = (d) => {
      resolve(d);
      done();
    };
    p.reject = (e) => {
      reject(e);
      done();
    };
    const go = (bytes: Uint8Array) => {
      if (!this.pending.has(p.seq)) return;
      if (!link.fits(need))
        return void link.reserve(need).then(
          () => go(bytes),
          (e: Error) =>
            this.end(
              { groupId: this.groupId, reason: 'failed', error: { name: 'PeerFailureError', message: e.message } },
              new PeerFailureError(e.message, this.context(p.op, p.seq)),
            ),
        );
      link.send(header, bytes);
      p.sentMs = nowMs();
    };
    this.localQueued++;
    // alone: straight into the segment; behind another op: a copy now, as the caller may change its tensor meanwhile
    if (this.localQueued === 1) go(data);
    else {
      const copy = data.slice();
      void prev.then(() => go(copy));
    }
  }

  private context(op: string, seq: number, peers?: number[]): ErrorContext {
    return { op, group: this.groupId, seq, rank: this.rank, ...(peers ? { peers } : {}) };
  }

  private onResult(m: Msg): void {
    const chunk = chunkOf(m);
    if (chunk) {
      const p = this.pending.get(chunk.seq);
      if (!p) return this.channel.drop('res', 'unexpected', `a chunk of op #${chunk.seq}, which waits for no result`);
      if (p.assembly) return this.addChunk(p, chunk.offset, m.data);
      // before its header: no more than the result can hold
      if (p.earlyBytes + m.data.byteLength > p.outBytes)
        return this.channel.drop('res', 'over_limit', `early chunks of op #${p.seq} beyond its ${p.outBytes} bytes`);
      p.early.push({ offset: chunk.offset, data: m.data.slice() });
      p.earlyBytes += m.data.byteLength;
      return;
    }
    const r = this.channel.decode('res', ServiceGroupResultSchema, m);
    if (r) this.onResultHeader(r, false);
  }

  /** A result's header, from NATS (its data follows in chunks) or the local path (its data in the segment). */
  private onResultHeader(r: ServiceGroupResult, local: boolean): void {
    const p = this.pending.get(r.seq);
    if (!p) return this.channel.drop('res', 'unexpected', `a result of op #${r.seq}, which waits for none`);
    if (p.assembly) return this.channel.drop('res', 'duplicate', `the result of op #${r.seq} again`);
    if (r.ok && r.bytes !== p.outBytes) {
      const why = `result of op #${p.seq}: ${r.bytes} bytes, the op's result has ${p.outBytes}`;
      return this.end(
        { groupId: this.groupId, reason: 'failed', error: { name: 'PeerFailureError', message: why } },
        new PeerFailureError(why, this.context(p.op, p.seq)),
      );
    }
    if (!r.ok) {
      const err = typedError(r.error, this.context(p.op, p.seq), this.backend);
      // the agent tells the others itself (its end event); this member stops here
      this.end(null, err);
      return;
    }
    p.timing = r.timing;
    if (local) {
      const view = r.bytes === 0 ? new Uint8Array(0) : this.link?.view(r.bytes);
      if (!view) {
        const why = `result of op #${p.seq}: ${r.bytes} bytes do not fit the shared segment`;
        return this.end(
          { groupId: this.groupId, reason: 'failed', error: { name: 'PeerFailureError', message: why } },
          new PeerFailureError(why, this.context(p.op, p.seq)),
        );
      }
      // another op waits to use the segment: this result leaves it now
      return this.settle(p, this.localQueued > 1 ? view.slice() : view);
    }
    p.assembly = new Assembly(r.bytes);
    for (const e of p.early.splice(0)) this.addChunk(p, e.offset, e.data);
    if (p.assembly.complete) this.settle(p, p.assembly.data);
  }

  private addChunk(p: Pending, offset: number, data: Uint8Array): void {
    const why = p.assembly!.add(offset, data);
    if (why)
      this.end(
        { groupId: this.groupId, reason: 'failed', error: { name: 'PeerFailureError', message: `result of op #${p.seq}: ${why}` } },
        new PeerFailureError(`result of op #${p.seq}: ${why}`, this.context(p.op, p.seq)),
      );
    else if (p.assembly!.complete) this.settle(p, p.assembly!.data);
  }

  private settle(p: Pending, data: Uint8Array): void {
    if (p.timing) this.lastTiming = { calledMs: p.calledMs, sentMs: p.sentMs ?? p.calledMs, ...p.timing, doneMs: nowMs() };
    clearTimeout(p.timer);
    this.pending.delete(p.seq);
    p.resolve(data);
  }

  private onHeartbeat(m: Msg): void {
    const hb = this.channel.decode('hb', ServiceGroupHeartbeatSchema, m);
    if (!hb) return;
    if (hb.rank >= this.size) return this.channel.drop('hb', 'invalid', `rank ${hb.rank} of a group of ${this.size}`);
    if (hb.n !== undefined) {
      const who = `${hb.role}:${hb.rank}`;
      if (hb.n <= (this.heardN.get(who) ?? 0)) return this.channel.drop('hb', 'duplicate', `${who}'s heartbeat ${hb.n} again`);
      this.heardN.set(who, hb.n);
    }
    this.liveness.heard(hb);
    if (hb.role === 'agent' && hb.rank === this.rank) this.toAgent.heard(hb.up);
    // the local path only where this member's own agent says, under the group's MAC
    if (hb.role === 'agent' && hb.rank === this.rank && hb.socket) this.agentSocket = hb.socket;
    if (hb.role === 'agent' && hb.ready) {
      this.readyAgents.add(hb.rank);
      if (this.readyAgents.size === this.size) this.onReady?.();
    }
  }

  private onEnd(m: Msg): void {
    const e = this.channel.decode('end', ServiceGroupEndSchema, m);
    if (!e || this.ended) return;
    if (e.groupId !== this.groupId) return this.channel.drop('end', 'invalid', `an end of group ${JSON.stringify(e.groupId)}`);
    const peers = e.rank === undefined ? undefined : [e.rank];
    const ctx = { group: this.groupId, rank: this.rank, ...(peers ? { peers } : {}) };
    const err =
      e.reason === 'failed' && e.error
        ? typedError(e.error, ctx, this.backend)
        : new PeerFailureError(
            e.reason === 'left' ? `${e.who ?? 'a member'} left the group` : `${e.who ?? 'a member'} was lost (not heard for ${SERVICE_GROUP_LOST_ABOUT})`,
            ctx,
          );
    // the leaver took part in our ops up to its last: they run to their results or their own timeout
    if (e.reason === 'left' && e.seq) this.end(null, err, { keepThrough: e.seq });
    else if (e.reason === 'left') this.end(null, err, { graceMs: RESULT_GRACE_MS });
    else this.end(null, err, e.reason === 'failed' && e.seq ? { graceMs: RESULT_GRACE_MS, failedSeq: e.seq } : {});
  }

  /**
   * Back from an outage (ours, or our agent's): the ops sent before it without a result yet go
   * again, in order. What was published into the dropped connection, or while the agent had no
   * subscription, is lost; the agent takes a copy of an op it has (or ran: it sends that result
   * again) as a duplicate.
   */
  private resendUnanswered(): void {
    for (const p of [...this.pending.values()].sort((a, b) => a.seq - b.seq)) if (p.resend && !p.assembly) p.resend();
  }

  /** This member's own connection has been down longer than the group outlasts. */
  private outage(): void {
    if (this.ended) return;
    const err = this.conn.lost(
      `group ${this.groupId} ended: NATS was unreachable for more than the ${SERVICE_GROUP_OUTAGE_MS / 1000} s a service group outlasts`,
      {
        group: this.groupId,
        rank: this.rank,
      },
    );
    if (!err) return;
    this.end({ groupId: this.groupId, reason: 'failed', rank: this.rank, error: { name: err.name, message: err.message } }, err);
  }

  private lost(rank: number, role: Role): void {
    if (this.ended) return;
    const who = describe(this.placed.members, rank, role);
    const err = new PeerFailureError(`${who} was lost (not heard for ${SERVICE_GROUP_LOST_ABOUT})`, { group: this.groupId, rank: this.rank, peers: [rank] });
    this.end({ groupId: this.groupId, reason: 'lost', who, rank }, err);
  }

  /**
   * Ends the group here: tells the others (`notice`), fails every pending op with `err`; those that
   * may have results on their way (every op, or those before `failedSeq`) after `graceMs`; those up
   * to `keepThrough` not at all (they end by their result or their own timeout).
   */
  private end(notice: ServiceGroupEnd | null, err: CmeshError, { graceMs = 0, failedSeq = 0, keepThrough = 0 } = {}): void {
    if (this.ended) return;
    this.ended = err;
    this.keptThrough = keepThrough;
    if (notice) this.publish(this.names.serviceGroups.end(this.groupId), notice);
    this.onEnded?.(err);
    this.stopBeating();
    const failPending = (now: boolean) => {
      for (const p of this.pending.values()) {
        if (p.seq <= keepThrough) continue;
        if (now && graceMs > 0 && (!failedSeq || p.seq < failedSeq)) continue;
        clearTimeout(p.timer);
        p.reject(err);
        this.pending.delete(p.seq);
      }
    };
    failPending(true);
    if (graceMs > 0 && this.pending.size) setTimeout(() => failPending(false), graceMs).unref();
  }

  private stopBeating(): void {
    this.liveness.stop();
    this.toAgent.close();
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  private publish(subject: string, body: unknown): void {
    this.channel.json(subject, body);
  }

  /** Stops everything of this group on the connection. */
  close(): void {
    this.stopBeating();
    this.link?.close();
    this.link = null;
    for (const s of this.subs.splice(0)) s.unsubscribe();
    if (!this.ended) this.ended = new PeerFailureError(`group ${this.groupId} was closed`, { group: this.groupId, rank: this.rank });
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(this.ended);
    }
    this.pending.clear();
  }
}
