// The module-level torch.distributed API: a default (world) process group per process, groups
// created with newGroup, and the option-object forms of every call (asyncOp returns a Work).
import type { AlgorithmName } from './algorithms';
import { timeoutArg } from './ops/validate';
import { InvalidArgumentError, NotInitializedError } from './errors';
import { DEFAULT_TIMEOUT_MS, ProcessGroup } from './process-group';
import { BACKEND_NAMES, BackendKind, BackendName, BackendProvider, isBackendName } from './backends/backend';
import { openTcp } from './backends/tcp/open-tcp';
import { NcclOptions, openNccl } from './backends/nccl/open-nccl';
import { ReduceOp } from './reduce-op';
import { rendezvous } from './rendezvous';
import { PrefixStore, Store } from './store';
import type { Tensor } from './tensor/dtype';
import type { TrafficCounters } from './traffic';
import { transportMode } from './transport/shm/select';
import { MetricsExporter, startLauncherExporter } from './metrics/exporter';
import {
  LAUNCHER_BIND_ENV,
  allowedCpus,
  bindMainThread,
  bindToCore,
  cpusAllowed,
  launcherBinding,
  planRankBinding,
  unbindMainThread,
} from './transport/core-binding';
import type { Binding } from './transport/core-binding';
import { debug, debugOn } from './debug';
import { generateSecret } from './auth/secret';
import { derivedSecret, launcherSecret } from './rendezvous/store-names';
import { Work } from './work';
import { WorldTrace } from './trace/world-trace';
import { flightRecorder } from './trace/recorder';
import { traceExchangeMs } from './trace/exchange';
import type { TraceDump } from './trace/dump';
import { startTraceResponder, TraceResponder } from './trace/responder';

/** torch's GroupMember.NON_GROUP_MEMBER: what newGroup returns to ranks outside the group. */
export const GroupMember = {
  NON_GROUP_MEMBER: Object.freeze({ nonGroupMember: true as const }),
  /** torch's GroupMember.WORLD / group.WORLD: the default process group (undefined before init). */
  get WORLD(): ProcessGroup | undefined {
    return world?.pg;
  },
};
export type NonGroupMember = typeof GroupMember.NON_GROUP_MEMBER;
export type Group = ProcessGroup | NonGroupMember | undefined;

export interface InitOptions {
  /** `tcp` (default; `gloo` is the same, torch's name for it) or `nccl` (the GPU sidecar). */
  backend?: BackendName;
  initMethod?: string;
  rank?: number;
  worldSize?: number;
  store?: Store;
  /** Default timeout (ms) of every blocking call of this group; torch's default is 30 minutes. */
  timeout?: number;
  /**
   * Bind this process's main thread to a core (see bindToCore): true = LOCAL_RANK's core, a number
   * = that CPU, false = not even where `cmesh run` asked. Default: only what the launcher asked.
   */
  bindToCore?: boolean | number;
  /**
   * Data-plane transport between ranks (default: CMESH_TRANSPORT, else auto): `auto` = shared memory
   * between ranks of one host and TCP between hosts; `shm` = shared memory or a
   * TransportUnavailableError; `tcp` = TCP only.
   */
  transport?: 'auto' | 'tcp' | 'shm';
  /** nccl: this rank's GPU (torch's device_id). Default: LOCAL_RANK, else 0. */
  deviceId?: number;
  /** nccl: the sidecar to attach to or spawn (binary, library paths, socket). */
  nccl?: NcclOptions;
  /**
   * The run's shared secret (default: CMESH_SECRET, which `cmesh run` sets; at least 16
   * characters). Set, every TcpStore (env://, tcp://) and data-plane connection first passes an
   * HMAC-SHA256 challenge both ways; a connection without it is refused before it can read or
   * write anything (AuthenticationError). Unset: no authentication.
   */
  secret?: string;
  /**
   * The settings this group reads, as torchrun's environment would give them (RANK, WORLD_SIZE,
   * MASTER_ADDR/MASTER_PORT, LOCAL_RANK, LOCAL_WORLD_SIZE, CMESH_ALGO, CMESH_TRANSPORT,
   * CMESH_SECRET, CMESH_TRACE_JOB, ...). Default: process.env. A program that runs one group after
   * another with different settings passes them here instead of changing its environment.
   */
  env?: NodeJS.ProcessEnv;
}

export interface CommonOptions {
  group?: Group;
  asyncOp?: boolean;
  timeout?: number;
}

interface World {
  pg: ProcessGroup;
  /** What every group's backend shares (tcp: the Mesh; nccl: the sidecar). */
  backends: BackendProvider;
  rank: number;
  store: Store;
  groups: ProcessGroup[];
  nextGroupId: number;
  /** the flight recorder of this world's groups */
  trace: WorldTrace;
  /** answers the coordinator's trace requests (ranks launched with CMESH_TRACE_NATS_URL) */
  responder?: TraceResponder;
}

let world: World | undefined;
let launcherExporter: Promise<MetricsExporter | undefined> | undefined;

// bindToCore(): binds the main thread to one core, like `mpirun --bind-to core`; the library never
// binds on its own. planRankBinding, allowedCpus, unbindMainThread and LAUNCHER_BIND_ENV are for
// launchers (`cmesh run`, the agents' job workers): the core a rank should have, and how `cmesh
// run` asks for it.
export { bindToCore, planRankBinding, allowedCpus, cpusAllowed, unbindMainThread, LAUNCHER_BIND_ENV };
export type { Binding };

export async function initProcessGroup(opts: InitOptions = {}): Promise<void> {
  if (world) throw new InvalidArgumentError('initProcessGroup: the default process group is already initialized; call destroyProcessGroup() first');
  const requested: unknown = opts.backend ?? 'tcp';
  if (!isBackendName(requested)) {
    throw new InvalidArgumentError(`initProcessGroup: unknown backend ${JSON.stringify(requested)} (available: ${BACKEND_NAMES.join(', ')})`);
  }
  const backend: BackendKind = requested === 'gloo' ? 'tcp' : requested;
  const env = opts.env ?? process.env;
  const transport = transportMode(opts.transport, env);
  const timeoutMs = opts.timeout ?? DEFAULT_TIMEOUT_MS;
  // the flight recorder's settings are checked before anything starts
  flightRecorder();
  traceExchangeMs(env);
  if (!(timeoutMs > 0)) throw new InvalidArgumentError(`initProcessGroup: timeout must be a positive number of ms, got ${opts.timeout}`);
  const { store, rank, worldSize } = await rendezvous({
    initMethod: opts.initMethod,
    rank: opts.rank,
    worldSize: opts.worldSize,
    store: opts.store,
    timeoutMs,
    secret: opts.secret,
    // undefined, not process.env: a TcpStore then resolves CMESH_SECRET itself, naming it in errors
    env: opts.env,
  });
  const prefixed = new PrefixStore('cmesh/default_pg', store);
  const everyone = [...Array(worldSize).keys()];
  let backends: BackendProvider | undefined;
  let pg: ProcessGroup;
  const trace = new WorldTrace({ rank, worldSize, store, env });
  // the data plane's secret also keys the MAC of the flight recorder's answers (trace/answer-mac.ts)
  let secret = opts.secret ?? (env.CMESH_SECRET || undefined);
  try {
    if (backend === 'nccl') backends = await openNccl({ rank, worldSize, store: prefixed, timeoutMs, deviceId: opts.deviceId, nccl: opts.nccl, env });
    else {
      const dataPlane = await dataPlaneSecret(opts.secret, prefixed, store, env);
      secret ??= dataPlane;
      backends = await openTcp({ rank, worldSize, store: prefixed, timeoutMs, transport, secret: dataPlane, env });
    }
    pg = new ProcessGroup(0, everyone, rank, await backends.forGroup(0, everyone), timeoutMs, trace);
  } catch (e) {
    trace.close();
    if (debugOn) debug('init', `error: ${(e as Error).message}`);
    await backends?.close().catch(() => undefined);
    if (!opts.store) await store.close().catch(() => undefined); // ours (rank 0's may be the TCP store's server); a caller's stays open
    throw e;
  }
  // only when asked: by this call, or by `cmesh run` (CMESH_RUN_BIND_CPU, its plan for this rank).
  // After the mesh: a bound main thread sees one core, and the data plane decides whether to
  // busy-poll from the cores it sees.
  const bind = opts.bindToCore ?? launcherBinding(env);
  if (typeof bind === 'number') bindMainThread(bind);
  else if (bind === true) bindToCore({ env });
  world = { pg, backends, rank, store, groups: [pg], nextGroupId: 1, trace };
  // `cmesh run --rdzv-backend nats` and the agents' job workers ask for it (CMESH_TRACE_NATS_URL)
  const w = world;
  w.responder = await startTraceResponder(trace, env, secret).catch((e: Error) => {
    console.error(`cmesh: flight recorder not published on NATS: ${e.message}`);
    return undefined;
  });
  if (debugOn) debug('init', `process group ready: rank ${rank} of ${worldSize}, backend ${backend}`);
  // `cmesh run --metrics-port` asked for it (CMESH_RUN_METRICS_PORT); nothing else starts one
  launcherExporter ??= startLauncherExporter(env).catch((e: Error) => {
    console.error(`cmesh: metrics exporter not started: ${e.message}`);
    return undefined;
  });
  await launcherExporter;
}

/**
 * The data plane's secret: the one given (option, CMESH_SECRET); else, on a NATS store, one
 * derived from the ranks' NATS password for this bucket (nothing secret is written to a bucket),
 * or on a server without logins one the first rank to ask makes there; else none.
 */
async function dataPlaneSecret(given: string | undefined, prefixed: Store, store: Store, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (given !== undefined || env.CMESH_SECRET) return given;
  if (!(store as { keepsSecrets?: boolean }).keepsSecrets) return undefined;
  const base = launcherSecret(env);
  const bucket = (store as { bucket?: string }).bucket;
  if (base && bucket) return derivedSecret(base, `init\0${bucket}`);
  return (await prefixed.compareSet('run_secret', '', generateSecret())).toString();
}

export function isInitialized(): boolean {
  return world !== undefined;
}

function requireWorld(op: string): World {
  if (!world) throw new NotInitializedError(`${op}: default process group has not been initialized, please make sure to call initProcessGroup()`, { op });
  return world;
}

function isNonMember(g: Group): g is NonGroupMember {
  return g === GroupMember.NON_GROUP_MEMBER;
}

function resolve(op: string, g: Group): ProcessGroup | undefined {
  const w = requireWorld(op);
  if (isNonMember(g)) return undefined;
  if (g === undefined) return w.pg;
  if (!(g instanceof ProcessGroup)) throw new InvalidArgumentError(`${op}: group must come from newGroup()`, { op });
  if (g.isDestroyed) throw new NotInitializedError(`${op}: process group ${g.name} has been destroyed`, { op, group: g.name });
  return g;
}

export function getRank(group?: Group): number {
  const pg = resolve('getRank', group);
  return pg ? pg.rank : -1;
}

export function getWorldSize(group?: Group): number {
  const pg = resolve('getWorldSize', group);
  return pg ? pg.size : -1;
}

export function getBackend(group?: Group): BackendKind {
  const pg = resolve('getBackend', group);
  if (!pg) throw new InvalidArgumentError('getBackend: this rank is not a member of the group');
  return pg.backend;
}

/** World rank of a group rank (torch's get_global_rank). */
export function getGlobalRank(group: ProcessGroup, groupRank: number): number {
  const r = group.worldRanks[groupRank];
  if (r === undefined) throw new InvalidArgumentError(`getGlobalRank: group rank ${groupRank} is not in group ${group.name}`);
  return r;
}

/** Every rank of the world calls it with the same ranks (torch semantics); non-members get NON_GROUP_MEMBER. */
export async function newGroup(ranks?: number[], opts: { timeout?: number } = {}): Promise<ProcessGroup | NonGroupMember> {
  const w = requireWorld('newGroup');
  const size = w.pg.size;
  const members = ranks === undefined ? [...Array(size).keys()] : [...ranks].sort((a, b) => a - b);
  for (const r of members) {
    if (!Number.isInteger(r) || r < 0 || r >= size) throw new InvalidArgumentError(`newGroup: rank ${r} is out of range [0, ${size})`);
  }
  if (new Set(members).size !== members.length) throw new InvalidArgumentError(`newGroup: ranks contain duplicates: [${ranks!.join(', ')}]`);
  if (!members.length) throw new InvalidArgumentError('newGroup: ranks must not be empty');
  timeoutArg(opts.timeout, 'newGroup');
  const id = w.nextGroupId++; // same order on every rank, so the same id everywhere
  if (!members.includes(w.pg.rank)) return GroupMember.NON_GROUP_MEMBER;
  const pg = new ProcessGroup(id, members, w.rank, await w.backends.forGroup(id, members), opts.timeout ?? w.pg.timeoutMs, w.trace);
  w.groups.push(pg);
  return pg;
}

export async function destroyProcessGroup(group?: Group): Promise<void> {
  const w = requireWorld('destroyProcessGroup');
  if (isNonMember(group)) return;
  if (group !== undefined && group !== w.pg) {
    const g = group as ProcessGroup;
    if (!g.isDestroyed) await g.destroy();
    return;
  }
  world = undefined;
  w.trace.close();
  await w.responder?.close().catch(() => undefined);
  for (const g of w.groups) if (!g.isDestroyed) await g.destroy().catch(() => undefined);
  await w.backends.close();
  await w.store.close();
}

/** The world's store (c10d's default store), for bootstrap data of your own. */
export function getStore(): Store {
  return requireWorld('getStore').store;
}

// ---- calls ----

function call<T>(op: string, opts: CommonOptions | undefined, fn: (pg: ProcessGroup) => Promise<T>, empty: T): Promise<T> | Work<T> {
  let p: Promise<T>;
  if (opts?.asyncOp) {
    const pg = resolve(op, opts.group); // throws at the call, like torch
    return new Work(pg ? fn(pg) : Promise.resolve(empty), op);
  }
  try {
    const pg = resolve(op, opts?.group);
    p = pg ? fn(pg) : Promise.resolve(empty);
  } catch (err) {
    p = Promise.reject(err);
  }
  return p;
}

type Ret<O, T = void> = O extends { asyncOp: true } ? Work<T> : Promise<T>;

export interface P2POptions extends Omit<CommonOptions, 'asyncOp'> {
  tag?: number;
}

export function send(tensor: Tensor, opts: P2POptions & { dst: number }): Promise<void> {
  return call('send', opts, (pg) => pg.send(tensor, opts.dst, opts.tag, opts), undefined) as Promise<void>;
}

/** Resolves with the sender's rank (torch returns it too); src omitted = any source. */
export function recv(tensor: Tensor, opts: P2POptions & { src?: number } = {}): Promise<number> {
  return call('recv', opts, (pg) => pg.recv(tensor, opts.src, opts.tag, opts), -1) as Promise<number>;
}

export function isend(tensor: Tensor, opts: P2POptions & { dst: number }): Work {
  return call('isend', { ...opts, asyncOp: true }, (pg) => pg.send(tensor, opts.dst, opts.tag, opts), undefined) as Work;
}

/** work.result() is the sender's rank once complete. */
export function irecv(tensor: Tensor, opts: P2POptions & { src?: number } = {}): Work<number> {
  return call('irecv', { ...opts, asyncOp: true }, (pg) => pg.recv(tensor, opts.src, opts.tag, opts), -1) as Work<number>;
}

export function broadcast<O extends CommonOptions & { src: number; algorithm?: AlgorithmName<'broadcast'> }>(tensor: Tensor, opts: O): Ret<O> {
  return call('broadcast', opts, (pg) => pg.broadcast(tensor, opts.src, opts), undefined) as Ret<O>;
}

export function reduce<O extends CommonOptions & { dst: number; op?: ReduceOp; algorithm?: AlgorithmName<'reduce'> }>(tensor: Tensor, opts: O): Ret<O> {
  return call('reduce', opts, (pg) => pg.reduce(tensor, opts.dst, opts.op, opts), undefined) as Ret<O>;
}

export function allReduce<O extends CommonOptions & { op?: ReduceOp; algorithm?: AlgorithmName<'allReduce'> }>(tensor: Tensor, opts?: O): Ret<O> {
  return call('allReduce', opts, (pg) => pg.allReduce(tensor, opts?.op, opts), undefined) as Ret<O>;
}

export function gather<O extends CommonOptions & { dst?: number; gatherList?: Tensor[] }>(tensor: Tensor, opts: O): Ret<O> {
  return call('gather', opts, (pg) => pg.gather(tensor, opts.gatherList, opts.dst ?? 0, opts), undefined) as Ret<O>;
}

export function scatter<O extends CommonOptions & { src?: number; scatterList?: Tensor[] }>(tensor: Tensor, opts: O): Ret<O> {
  return call('scatter', opts, (pg) => pg.scatter(tensor, opts.scatterList, opts.src ?? 0, opts), undefined) as Ret<O>;
}

export function allGather<O extends CommonOptions & { algorithm?: AlgorithmName<'allGather'> }>(tensorList: Tensor[], tensor: Tensor, opts?: O): Ret<O> {
  return call('allGather', opts, (pg) => pg.allGather(tensorList, tensor, opts), undefined) as Ret<O>;
}

export function allGatherIntoTensor<O extends CommonOptions & { algorithm?: AlgorithmName<'allGather'> }>(output: Tensor, input: Tensor, opts?: O): Ret<O> {
  return call('allGatherIntoTensor', opts, (pg) => pg.allGatherIntoTensor(output, input, opts), undefined) as Ret<O>;
}

export function reduceScatter<O extends CommonOptions & { op?: ReduceOp; algorithm?: AlgorithmName<'reduceScatter'> }>(
  output: Tensor,
  inputList: Tensor[],
  opts?: O,
): Ret<O> {
  return call('reduceScatter', opts, (pg) => pg.reduceScatter(output, inputList, opts?.op, opts), undefined) as Ret<O>;
}

export function reduceScatterTensor<O extends CommonOptions & { op?: ReduceOp; algorithm?: AlgorithmName<'reduceScatter'> }>(
  output: Tensor,
  input: Tensor,
  opts?: O,
): Ret<O> {
  return call('reduceScatterTensor', opts, (pg) => pg.reduceScatterTensor(output, input, opts?.op, opts), undefined) as Ret<O>;
}

export function allToAll<O extends CommonOptions>(outputList: Tensor[], inputList: Tensor[], opts?: O): Ret<O> {
  return call('allToAll', opts, (pg) => pg.allToAll(outputList, inputList, opts), undefined) as Ret<O>;
}

export function allToAllSingle<O extends CommonOptions & { outputSplitSizes?: number[]; inputSplitSizes?: number[] }>(
  output: Tensor,
  input: Tensor,
  opts?: O,
): Ret<O> {
  return call('allToAllSingle', opts, (pg) => pg.allToAllSingle(output, input, opts?.outputSplitSizes, opts?.inputSplitSizes, opts), undefined) as Ret<O>;
}

export function barrier<O extends CommonOptions>(opts?: O): Ret<O> {
  return call('barrier', opts, (pg) => pg.barrier(opts), undefined) as Ret<O>;
}

export function getTrafficCounters(group?: Group): TrafficCounters {
  const pg = resolve('getTrafficCounters', group);
  return pg ? pg.trafficCounters() : { bytesSent: 0, bytesReceived: 0, byOp: {} };
}

export function resetTrafficCounters(group?: Group): void {
  resolve('resetTrafficCounters', group)?.traffic.reset();
}

// ---- flight recorder ----

/**
 * This rank's flight recorder dump (torch's _dump_nccl_trace): every kept entry of every group,
 * oldest first, with torch's field names. Empty entries when CMESH_TRACE_BUFFER_SIZE=0.
 */
export function getTrace(): TraceDump {
  return requireWorld('getTrace').trace.dump();
}

/**
 * Writes this rank's dump to <dir>/cmesh_trace_rank_<rank>.json (dir: the argument, else
 * CMESH_TRACE_DUMP_DIR) and returns the file's path.
 */
export function dumpTrace(dir?: string): string {
  return requireWorld('dumpTrace').trace.writeDump(dir);
}
