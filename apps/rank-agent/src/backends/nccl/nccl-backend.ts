// The rank agent's `nccl` backend: the library's sidecar owner (NcclSidecar: spawns or attaches,
// says whether NCCL is usable here), running a job's collective sweep on the GPU in lock-step
// with the other ranks, which find the NCCL unique id through the coordinator's store.
import { InvalidArgumentError, NcclCommunicator, NcclSidecar, NcclSidecarOptions, NcclUnavailableError, validateReduceOp } from '@cmesh/collectives';
import type { Store } from '@cmesh/collectives';
import { DType, elementSize, isDType, isSweepOp, viewAs } from '@cmesh/collectives';
import { benchCollective, checkOutput, filledTensor } from '@cmesh/bench';
import type { BenchOp, BenchRedop } from '@cmesh/protocol';

/** Bytes written over the receive buffer before the op, so a skipped write cannot pass: 0xFF is NaN or -1/255, never a pattern value. */
const RECV_SENTINEL_BYTE = 0xff;

export type NcclBackendOptions = NcclSidecarOptions;

export interface NcclSweepSpec {
  store: Store;
  /** Store key prefix unique to this sweep (e.g. `jobs/<id>`); the unique id goes under it. */
  key: string;
  rank: number;
  worldSize: number;
  /**
   * This agent's CUDA device (its configured device index, i.e. its local rank on the host). Not
   * derived from the job rank: two ranks of one host on one GPU is unsupported by NCCL and may hang.
   */
  device: number;
  collective: BenchOp;
  dtype: DType;
  redOp?: BenchRedop;
  root?: number;
  /** nccl-tests sizes in bytes. */
  sizes: number[];
  warmup?: number;
  iters?: number;
  verify?: boolean;
  /** Bounds each blocking step (unique-id wait, comm init, each collective) (ms). Default 5 min. */
  timeoutMs?: number;
  /** Job cancel: aborts the communicator at once, interrupting a collective in flight. */
  signal?: AbortSignal;
}

export interface NcclSweepRow {
  collective: BenchOp;
  dtype: DType;
  redOp: BenchRedop | null;
  root: number | null;
  sizeBytes: number;
  count: number;
  /** Device time per iteration (CUDA events), seconds. */
  timeSeconds: number;
  hostSeconds: number;
  algbwBytesPerSecond: number;
  busbwBytesPerSecond: number;
  /** Wrong elements on this rank; null when not verified or undefined here (non-root reduce/gather). */
  wrong: number | null;
}

/** The agent's nccl backend: the library's sidecar owner, plus the job sweep it runs on the GPU. */
export class NcclBackend extends NcclSidecar {
  readonly name = 'nccl';

  /** Runs the sweep on this rank; every rank of the job calls it with the same spec but its rank. */
  async runSweep(spec: NcclSweepSpec): Promise<NcclSweepRow[]> {
    const { client, hello } = this.client(spec.collective);
    const plan = validateSweep(spec, hello.deviceCount);
    const { rank, worldSize: nranks, timeoutMs } = plan;

    spec.signal?.throwIfAborted();
    const comm = await NcclCommunicator.create(client, { store: spec.store, key: `${spec.key}/nccl/unique-id`, rank, nranks, device: plan.device, timeoutMs });
    // The sidecar answers abort at once, on its connection thread: a cancelled job's collective
    // (possibly hung on a peer) fails ABORTED instead of running to its timeout.
    const onCancel = () => void comm.abort();
    if (spec.signal?.aborted) onCancel();
    else spec.signal?.addEventListener('abort', onCancel, { once: true });
    // sizes, data and checks as every sweep has them (@cmesh/bench); the sidecar runs and times the op
    const coll = benchCollective(spec.collective);
    const es = elementSize(spec.dtype);
    const points = spec.sizes.map((s) => coll.shape(s, es, nranks));
    let healthy = false;
    try {
      await comm.reserve(Math.max(es, ...points.map((p) => p.sendCount * es)), Math.max(es, ...points.map((p) => p.recvCount * es)), timeoutMs);
      const rows: NcclSweepRow[] = [];
      for (const p of points) {
        const request = {
          collective: spec.collective,
          count: p.count,
          dtype: spec.dtype,
          redOp: plan.redOp ?? undefined,
          root: plan.root ?? undefined,
          sendPeer: spec.collective === 'sendRecv' ? (rank + 1) % nranks : undefined,
          recvPeer: spec.collective === 'sendRecv' ? (rank - 1 + nranks) % nranks : undefined,
        };
        let wrong: number | null = null;
        if (plan.verify && p.count > 0) {
          const data = { rank, nranks, root: plan.root ?? -1, redop: plan.redOp ?? 'sum', count: p.count } as const;
          const input = filledTensor(spec.dtype, p.sendCount, coll.input(data));
          await comm.writeSend(new Uint8Array(input.buffer, input.byteOffset, input.byteLength), timeoutMs);
          await comm.fillRecv(p.recvCount * es, RECV_SENTINEL_BYTE, timeoutMs);
          await comm.collective({ ...request, warmup: 0, iters: 1 }, timeoutMs);
          const expected = coll.expected(data);
          if (expected) {
            const got = await comm.readRecv(p.recvCount * es, timeoutMs);
            wrong = checkOutput(viewAs(alignedCopy(got), spec.dtype), expected, data.redop, nranks);
          }
        }
        const timed = await comm.collective({ ...request, warmup: plan.warmup, iters: plan.iters }, timeoutMs);
        const t = timed.deviceSeconds;
        const algbw = t > 0 ? p.bytes / t : 0;
        rows.push({
          collective: spec.collective,
          dtype: spec.dtype,
          redOp: plan.redOp,
          root: plan.root,
          sizeBytes: p.bytes,
          count: p.count,
          timeSeconds: t,
          hostSeconds: timed.hostSeconds,
          algbwBytesPerSecond: algbw,
          busbwBytesPerSecond: algbw * coll.busBwFactor(nranks),
          wrong,
        });
      }
      healthy = true;
      return rows;
    } finally {
      spec.signal?.removeEventListener('abort', onCancel);
      // destroy after a finished sweep (abort if that fails; its rows stand either way), abort
      // after a failed one (peers may be mid-collective); then the buffers
      await comm.close(healthy, timeoutMs);
    }
  }
}

interface SweepPlan {
  rank: number;
  worldSize: number;
  device: number;
  redOp: BenchRedop | null;
  root: number | null;
  warmup: number;
  iters: number;
  verify: boolean;
  timeoutMs: number;
}

function checkInt(name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Checks the spec before anything touches the GPU or the store. */
export function validateSweep(spec: NcclSweepSpec, deviceCount: number): SweepPlan {
  const worldSize = checkInt('worldSize', spec.worldSize, 1, 1 << 20);
  const rank = checkInt('rank', spec.rank, 0, worldSize - 1);
  if (!isSweepOp(spec.collective)) {
    throw new InvalidArgumentError(`unknown collective ${JSON.stringify(spec.collective)} for the nccl backend`);
  }
  if (!isDType(spec.dtype)) throw new InvalidArgumentError(`unknown dtype ${JSON.stringify(spec.dtype)}`);
  const coll = benchCollective(spec.collective);
  let redOp: BenchRedop | null = null;
  if (coll.reduces) {
    const op = spec.redOp ?? 'sum';
    validateReduceOp(op, spec.dtype);
    if (op !== 'sum' && op !== 'product' && op !== 'min' && op !== 'max' && op !== 'avg') {
      throw new InvalidArgumentError(`ReduceOp ${op} is not supported by NCCL (sum, product, min, max, avg)`);
    }
    redOp = op;
  }
  const root = coll.rooted ? checkInt('root', spec.root ?? 0, 0, worldSize - 1) : null;
  if (deviceCount < 1) throw new NcclUnavailableError('no CUDA device');
  const device = checkInt('device', spec.device, 0, deviceCount - 1);
  if (!Array.isArray(spec.sizes) || spec.sizes.length === 0) throw new InvalidArgumentError('sizes must be a non-empty array of byte counts');
  spec.sizes.forEach((s, i) => checkInt(`sizes[${i}]`, s, 0, Number.MAX_SAFE_INTEGER));
  if (typeof spec.key !== 'string' || spec.key === '') throw new InvalidArgumentError('key must be a non-empty store prefix');
  return {
    rank,
    worldSize,
    device,
    redOp,
    root,
    // At least one: the first launches set up NCCL's connections lazily, and the sidecar aligns
    // the ranks and reports the slowest one only for runs with a warm-up.
    warmup: checkInt('warmup', spec.warmup ?? 5, 1, 1_000_000),
    iters: checkInt('iters', spec.iters ?? 20, 1, 1_000_000),
    verify: spec.verify ?? true,
    timeoutMs: checkInt('timeoutMs', spec.timeoutMs ?? 300_000, 1, 24 * 3600_000),
  };
}

/** A copy whose offset suits any dtype (a Buffer from the socket may start at an odd offset). */
function alignedCopy(b: Buffer): Uint8Array {
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}
