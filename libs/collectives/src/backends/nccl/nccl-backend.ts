// The nccl backend of a process group: each op goes to the sidecar as NCCL would run it on the
// GPU. Host tensors are copied into the communicator's device buffers, the collective runs, the
// result is copied back. Ops run one after another in the order they were issued (every rank
// issues them in the same order, as NCCL requires). Any failure aborts the communicator, as
// torch's ProcessGroupNCCL does: later ops of the group fail at once, naming the first failure.
import { CmeshError, DistTimeoutError, ErrorContext, describeContext } from '../../errors';
import { DType, Tensor, bytesOf, dtypeOf, elementSize } from '../../tensor/dtype';
import type { Backend, BackendCapabilities, BackendOp, CollectiveCall } from '../backend';
import type { NcclCommunicator } from './communicator';
import { CLEANUP_TIMEOUT_MS } from './communicator';
import { NcclError, NcclUnavailableError, SidecarFailure } from './errors';

/** How much later than the group's timeout the sidecar's deadline for an op falls (ms). */
const SIDECAR_DEADLINE_GRACE_MS = 1000;
import type { NcclCollective, SidecarRedOp } from './protocol';

/** One sidecar collective with the host data around it. */
interface Launch {
  collective: NcclCollective;
  dtype: DType;
  /** Elements per rank (NCCL's count / sendcount / recvcount). */
  count: number;
  redOp?: SidecarRedOp;
  /** Group ranks. */
  root?: number;
  sendPeer?: number;
  recvPeer?: number;
  sendBytes: number;
  recvBytes: number;
  /** Written to the send buffer, one after another from offset 0. */
  inputs?: readonly Tensor[];
  /** Read from the receive buffer, one after another from offset 0. */
  outputs?: readonly Tensor[];
}

export class NcclBackend implements Backend {
  readonly name = 'nccl' as const;
  private readonly rank: number;
  private readonly size: number;
  /** The last op issued: the next one starts after it. */
  private tail: Promise<unknown> = Promise.resolve();
  /** The first failure; the communicator has been aborted since. */
  private failure: CmeshError | null = null;

  constructor(
    private readonly comm: NcclCommunicator,
    readonly capabilities: BackendCapabilities,
    /** Group rank -> world rank. */
    private readonly worldRanks: readonly number[],
    private readonly worldRank: number,
    /** The longest deadline the sidecar takes (hello's limits.maxTimeoutMs). */
    private readonly maxTimeoutMs: number,
  ) {
    this.rank = worldRanks.indexOf(worldRank);
    this.size = worldRanks.length;
  }

  plan(): string {
    return 'nccl';
  }

  run(call: CollectiveCall, _algorithm: string, _seq: number, _sig: unknown, timeoutMs: number): BackendOp {
    return this.issue(
      this.launchOf(call),
      timeoutMs,
      this.worldRanks.filter((r) => r !== this.worldRank),
      undefined,
    );
  }

  /** NCCL has no tags (torch's ProcessGroupNCCL ignores them too): sends and receives between two ranks match in order. */
  send(tensor: Tensor, dst: number, _tag: number, timeoutMs: number): BackendOp {
    const c = tensor.length;
    const launch: Launch = {
      collective: 'send',
      dtype: dtypeOf(tensor),
      count: c,
      sendPeer: this.worldRanks.indexOf(dst),
      sendBytes: tensor.byteLength,
      recvBytes: 0,
      inputs: [tensor],
    };
    return this.issue(launch, timeoutMs, [dst], undefined);
  }

  recv(tensor: Tensor, src: number | undefined, _tag: number, timeoutMs: number): BackendOp<number> {
    // the group refuses an any-source receive before this (capabilities.recvAnySource)
    const from = src!;
    const launch: Launch = {
      collective: 'recv',
      dtype: dtypeOf(tensor),
      count: tensor.length,
      recvPeer: this.worldRanks.indexOf(from),
      sendBytes: 0,
      recvBytes: tensor.byteLength,
      outputs: [tensor],
    };
    return this.issue(launch, timeoutMs, [from], from);
  }

  /** After the ops issued so far: destroys the communicator (aborts it after a failure) and frees its buffers. */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((r) => (timer = setTimeout(r, CLEANUP_TIMEOUT_MS)));
    const drained = await Promise.race([this.tail.then(() => true), bound.then(() => false)]);
    clearTimeout(timer);
    await this.comm.close(drained && this.failure === null);
  }

  private issue<T>(launch: Launch, timeoutMs: number, peers: number[], result: T): BackendOp<T> {
    // The group's timer ends the op first (naming the peers) and aborts the communicator; the
    // sidecar's own deadline, a little later, bounds its waits should that abort not reach it.
    const deadline = Date.now() + timeoutMs + SIDECAR_DEADLINE_GRACE_MS;
    const done = this.tail.then(() => this.execute(launch, deadline)).then(() => result);
    this.tail = done.catch(() => undefined);
    return new NcclOp(this, done, peers);
  }

  private async execute(l: Launch, deadline: number): Promise<void> {
    if (this.failure) throw new NcclError(`the communicator was aborted after an earlier failure: ${this.failure.message}`, 'ABORTED');
    if (l.count === 0) return; // nothing to move, on every rank alike (their counts agree)
    const left = () => Math.min(this.maxTimeoutMs, Math.max(1, deadline - Date.now()));
    const comm = this.comm;
    await comm.reserve(l.sendBytes, l.recvBytes, left());
    if (l.inputs) await comm.writeSend(joined(l.inputs), left());
    await comm.collective(
      {
        collective: l.collective,
        count: l.count,
        dtype: l.dtype,
        redOp: l.redOp,
        root: l.root,
        sendPeer: l.sendPeer,
        recvPeer: l.recvPeer,
        warmup: 0,
        iters: 1,
      },
      left(),
    );
    if (l.outputs) {
      const total = l.outputs.reduce((a, t) => a + t.byteLength, 0);
      const got = await comm.readRecv(total, left());
      let off = 0;
      for (const t of l.outputs) {
        bytesOf(t).set(got.subarray(off, off + t.byteLength));
        off += t.byteLength;
      }
    }
  }

  /** The typed error for a failed op; the first failure aborts the communicator. */
  failed(raw: unknown, ctx: ErrorContext, peers: number[]): CmeshError {
    const err = explain(raw, ctx, peers);
    if (!this.failure) {
      this.failure = err;
      void this.comm.abort();
    }
    return err;
  }

  private launchOf(call: CollectiveCall): Launch {
    const n = this.size;
    const me = this.rank;
    switch (call.op) {
      case 'broadcast': {
        const t = call.tensor;
        const isRoot = me === call.root;
        return {
          collective: 'broadcast',
          dtype: dtypeOf(t),
          count: t.length,
          root: call.root,
          sendBytes: t.byteLength,
          recvBytes: t.byteLength,
          inputs: isRoot ? [t] : undefined,
          outputs: isRoot ? undefined : [t],
        };
      }
      case 'reduce': {
        const t = call.tensor;
        return {
          collective: 'reduce',
          dtype: dtypeOf(t),
          count: t.length,
          redOp: redOp(call.redOp),
          root: call.root,
          sendBytes: t.byteLength,
          recvBytes: t.byteLength,
          inputs: [t],
          outputs: me === call.root ? [t] : undefined,
        };
      }
      case 'allReduce': {
        const t = call.tensor;
        return {
          collective: 'allReduce',
          dtype: dtypeOf(t),
          count: t.length,
          redOp: redOp(call.redOp),
          sendBytes: t.byteLength,
          recvBytes: t.byteLength,
          inputs: [t],
          outputs: [t],
        };
      }
      case 'gather': {
        const t = call.input;
        const isRoot = me === call.root;
        return {
          collective: 'gather',
          dtype: dtypeOf(t),
          count: t.length,
          root: call.root,
          sendBytes: t.byteLength,
          recvBytes: isRoot ? n * t.byteLength : 0,
          inputs: [t],
          outputs: isRoot ? call.outputs : undefined,
        };
      }
      case 'scatter': {
        const t = call.output;
        const isRoot = me === call.root;
        return {
          collective: 'scatter',
          dtype: dtypeOf(t),
          count: t.length,
          root: call.root,
          sendBytes: isRoot ? n * t.byteLength : 0,
          recvBytes: t.byteLength,
          inputs: isRoot ? call.inputs : undefined,
          outputs: [t],
        };
      }
      case 'allGather': {
        const t = call.input;
        return {
          collective: 'allGather',
          dtype: dtypeOf(t),
          count: t.length,
          sendBytes: t.byteLength,
          recvBytes: n * t.byteLength,
          inputs: [t],
          outputs: call.outputs,
        };
      }
      case 'reduceScatter': {
        const out = call.output;
        const inputs = Array.isArray(call.input) ? (call.input as readonly Tensor[]) : [call.input as Tensor];
        return {
          collective: 'reduceScatter',
          dtype: dtypeOf(out),
          count: out.length,
          redOp: redOp(call.redOp),
          sendBytes: n * out.byteLength,
          recvBytes: out.byteLength,
          inputs,
          outputs: [out],
        };
      }
      case 'allToAll': {
        // equal blocks (the group checked): NCCL's count is one block
        const first = call.inputs[0];
        return {
          collective: 'allToAll',
          dtype: dtypeOf(first),
          count: first.length,
          sendBytes: n * first.byteLength,
          recvBytes: n * first.byteLength,
          inputs: call.inputs,
          outputs: call.outputs,
        };
      }
      case 'barrier':
        // torch's NCCL barrier: an all-reduce of one element
        return { collective: 'allReduce', dtype: 'uint8', count: 1, redOp: 'sum', sendBytes: elementSize('uint8'), recvBytes: elementSize('uint8') };
    }
  }
}

class NcclOp<T> implements BackendOp<T> {
  /** NCCL moves the bytes on the GPUs' links, not over cmesh's data plane. */
  readonly bytesSent = 0;
  readonly bytesReceived = 0;

  constructor(
    private readonly backend: NcclBackend,
    readonly done: Promise<T>,
    private readonly peers: number[],
  ) {}

  awaitedPeers(): number[] {
    return this.peers;
  }

  fail(raw: unknown, ctx: ErrorContext): CmeshError {
    return this.backend.failed(raw, ctx, this.peers);
  }
}

function redOp(op: string): SidecarRedOp {
  // the group's capability check has refused the bitwise ops NCCL lacks
  return op as SidecarRedOp;
}

/** The tensors as one run of bytes (a view when there is one). */
function joined(list: readonly Tensor[]): Uint8Array {
  if (list.length === 1) return bytesOf(list[0]);
  const out = new Uint8Array(list.reduce((a, t) => a + t.byteLength, 0));
  let off = 0;
  for (const t of list) {
    out.set(bytesOf(t), off);
    off += t.byteLength;
  }
  return out;
}

function explain(raw: unknown, ctx: ErrorContext, peers: number[]): CmeshError {
  const text = (e: unknown, c = ctx) => `${ctx.op} failed: ${(e as Error)?.message ?? String(e)} (${describeContext(c)})`;
  // the group's own timeout already names the group and the peers; the sidecar's only its request
  if (raw instanceof DistTimeoutError) return raw.context.group !== undefined ? raw : new DistTimeoutError(text(raw, { ...ctx, peers }), { ...ctx, peers });
  if (raw instanceof NcclUnavailableError) return raw;
  if (raw instanceof NcclError) return new NcclError(text(raw), raw.sidecarCode, ctx);
  const code = (raw as Partial<SidecarFailure>)?.sidecarCode;
  if (typeof code === 'string') return new NcclError(text(raw), code, ctx);
  return new CmeshError(text(raw), ctx);
}
