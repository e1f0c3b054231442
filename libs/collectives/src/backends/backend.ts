// The c10d split: a ProcessGroup validates arguments, numbers each op, runs its timeout, types
// its errors, and tells observers and traffic counters; a Backend moves the data. `tcp` (the CPU
// data plane: Mesh, OpComm and the algorithms) and `nccl` (the native sidecar on a GPU) are the
// two implementations.
import type { CmeshError, ErrorContext } from '../errors';
import type { Collective } from '../ops/names';
import type { ReduceOp } from '../reduce-op';
import type { DType, Tensor } from '../tensor/dtype';
import type { OpSignature } from '../transport/frame';

/** The names initProcessGroup accepts; `gloo` is torch's name for the CPU backend, answered by `tcp`. */
export const BACKEND_NAMES = ['tcp', 'gloo', 'nccl'] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];
/** The backends themselves (what getBackend() returns). */
export type BackendKind = Exclude<BackendName, 'gloo'>;

export function isBackendName(v: unknown): v is BackendName {
  return typeof v === 'string' && (BACKEND_NAMES as readonly string[]).includes(v);
}

/**
 * One collective as the backend receives it: arguments already checked by the ProcessGroup, ranks
 * as group ranks (`root`), lists one tensor per member in group-rank order. A list may hold views
 * of one tensor (allGatherIntoTensor, reduceScatterTensor, allToAllSingle).
 */
export type CollectiveCall =
  | { readonly op: 'broadcast'; readonly tensor: Tensor; readonly root: number }
  | { readonly op: 'reduce'; readonly tensor: Tensor; readonly redOp: ReduceOp; readonly root: number }
  | { readonly op: 'allReduce'; readonly tensor: Tensor; readonly redOp: ReduceOp }
  /** `outputs` on the root only */
  | { readonly op: 'gather'; readonly input: Tensor; readonly outputs: readonly Tensor[] | undefined; readonly root: number }
  /** `inputs` on the root only */
  | { readonly op: 'scatter'; readonly output: Tensor; readonly inputs: readonly Tensor[] | undefined; readonly root: number }
  | { readonly op: 'allGather'; readonly input: Tensor; readonly outputs: readonly Tensor[] }
  /** `input`: one contiguous tensor of size x output length, or one tensor per member */
  | { readonly op: 'reduceScatter'; readonly input: Tensor | readonly Tensor[]; readonly output: Tensor; readonly redOp: ReduceOp }
  | { readonly op: 'allToAll'; readonly inputs: readonly Tensor[]; readonly outputs: readonly Tensor[] }
  | { readonly op: 'barrier' };

/** What a backend can run; the ProcessGroup checks every call against it before anything moves. */
export interface BackendCapabilities {
  readonly collectives: ReadonlySet<Collective>;
  /** send / recv */
  readonly p2p: boolean;
  /** recv without a source (from whichever member sends first) */
  readonly recvAnySource: boolean;
  readonly dtypes: ReadonlySet<DType>;
  readonly reduceOps: ReadonlySet<ReduceOp>;
  /** allToAll / allToAllSingle with blocks of different sizes */
  readonly unevenAllToAll: boolean;
  /** whether the `algorithm` option (and CMESH_ALGO) picks among the backend's own algorithms */
  readonly algorithms: boolean;
  /** Why something is missing, by op name, added to the error (e.g. the library version that lacks it). */
  readonly notes?: Readonly<Partial<Record<Collective | 'send' | 'recv', string>>>;
}

/** One op in flight on a backend. */
export interface BackendOp<T = void> {
  readonly done: Promise<T>;
  /** True when the op has already completed inside the call that started it (then `done` is resolved). */
  readonly completed?: boolean;
  /** Group members (world ranks) this op still waits on, for a timeout's message. */
  awaitedPeers(): number[];
  /** Bytes this rank sent and received for the op over cmesh's own data plane (0 where another library moves them). */
  readonly bytesSent: number;
  readonly bytesReceived: number;
  /**
   * The op failed (`raw`: the backend's error, or the group's DistTimeoutError): stop what is left
   * of it, make the peers that would wait for this rank fail too, and return the typed error to report.
   */
  fail(raw: unknown, ctx: ErrorContext): CmeshError;
}

export interface Backend {
  readonly name: BackendKind;
  readonly capabilities: BackendCapabilities;
  /**
   * How the backend will run `call` (tcp: the algorithm, from `requested`, CMESH_ALGO or the cost
   * model; nccl: 'nccl'). Throws a typed error for a bad request; nothing has started.
   */
  plan(call: CollectiveCall, bytes: number, requested: string | undefined): string;
  /** Starts a collective already planned; `seq` is the group's sequence number for it. */
  run(call: CollectiveCall, algorithm: string, seq: number, sig: OpSignature, timeoutMs: number): BackendOp;
  /** `dst`, `src`: world ranks of members; `src` undefined = any member. recv resolves with the sender's world rank. */
  send(tensor: Tensor, dst: number, tag: number, timeoutMs: number): BackendOp;
  recv(tensor: Tensor, src: number | undefined, tag: number, timeoutMs: number): BackendOp<number>;
  /** Releases what the group holds (an NCCL communicator and its buffers); the group is destroyed. */
  close(): Promise<void>;
}

/**
 * This process's side of a backend, made by initProcessGroup: it makes each group's Backend and
 * owns what they share (tcp: the Mesh; nccl: the sidecar and its connection).
 */
export interface BackendProvider {
  readonly name: BackendKind;
  /** The backend of a group with these members (world ranks, sorted); every member calls it, groups in the same order. */
  forGroup(id: number, worldRanks: readonly number[]): Promise<Backend>;
  /** Closes what the groups share; their backends are closed first. */
  close(): Promise<void>;
}
