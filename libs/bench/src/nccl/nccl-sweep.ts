// The nccl backend's sweep on one rank: one communicator for the whole sweep (every collective,
// dtype and reduce op asked for), each size run out of place and, where the op has one, in place
// (nccl-tests' two column groups), each checked element by element before it is timed. The
// sidecar runs the timed loop on the GPU: warm-up, the ranks aligned, `iters` launches between two
// CUDA events with no host wait among them, the slowest rank's time. The rank agent's nccl jobs
// and scripts/gpu-check both run it.
import { InvalidArgumentError, NcclError, NcclUnavailableError, elementSize, isDType, isSweepOp, validateReduceOp, viewAs } from '@cmesh/collectives';
import { NcclCommunicator, NcclSidecar } from '@cmesh/collectives/nccl';
import type { DType, Store } from '@cmesh/collectives';
import type { SidecarClient } from '@cmesh/collectives/nccl';
import type { BenchMode, BenchOp, BenchRedop } from '@cmesh/protocol';
import { BenchShape, benchCollective } from '../collectives';
import { checkOutput, filledTensor } from '../pattern';
import { bufferBytes, DeviceBuffers, runLayout } from './nccl-buffers';

/** Bytes written over the receive side before a checked run, so a skipped write cannot pass: 0xFF is NaN or -1/255, never a pattern value. */
const RECV_SENTINEL_BYTE = 0xff;

/** One collective, dtype and reduce op of a sweep. */
export interface NcclSweepCase {
  collective: BenchOp;
  dtype: DType;
  redOp?: BenchRedop;
  root?: number;
}

export interface NcclSweepSpec {
  store: Store;
  /** Store key prefix unique to this sweep (e.g. `jobs/<id>`); the unique id goes under it. */
  key: string;
  rank: number;
  worldSize: number;
  /**
   * This rank's CUDA device (its agent's configured index, i.e. its local rank on the host). Not
   * derived from the job rank: two ranks of one communicator on one GPU is refused by NCCL.
   */
  device: number;
  /** every case runs on the same communicator, in this order */
  cases: NcclSweepCase[];
  /** nccl-tests sizes in bytes; sizes below one element per rank are skipped (as nccl-tests does) */
  sizes: number[];
  /** default both; in place only for ops that have it */
  modes?: BenchMode[];
  warmup?: number;
  iters?: number;
  verify?: boolean;
  /** check only sizes up to this many bytes (larger ones are timed, #wrong N/A); default all */
  verifyMaxBytes?: number;
  /** Bounds each blocking step (unique-id wait, comm init, each collective) (ms). Default 5 min. */
  timeoutMs?: number;
  /** Job cancel: aborts the communicator at once, interrupting a collective in flight. */
  signal?: AbortSignal;
  /** called after every row, e.g. to print or stream it */
  onRow?: (row: NcclSweepRow) => void;
}

export interface NcclSweepRow {
  collective: BenchOp;
  dtype: DType;
  redOp: BenchRedop | null;
  root: number | null;
  mode: BenchMode;
  sizeBytes: number;
  count: number;
  /** Device time per iteration (CUDA events around the launches), the slowest rank's, seconds. */
  timeSeconds: number;
  hostSeconds: number;
  algbwBytesPerSecond: number;
  busbwBytesPerSecond: number;
  /** Wrong elements on this rank; null when not checked or undefined here (non-root reduce/gather). */
  wrong: number | null;
}

interface PlannedCase {
  collective: BenchOp;
  dtype: DType;
  redOp: BenchRedop | null;
  root: number | null;
}

interface SweepPlan {
  rank: number;
  worldSize: number;
  device: number;
  cases: PlannedCase[];
  modes: BenchMode[];
  warmup: number;
  iters: number;
  verify: boolean;
  verifyMaxBytes: number;
  timeoutMs: number;
}

function checkInt(name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function planCase(c: NcclSweepCase, worldSize: number): PlannedCase {
  if (!isSweepOp(c.collective)) throw new InvalidArgumentError(`unknown collective ${JSON.stringify(c.collective)} for the nccl backend`);
  if (!isDType(c.dtype)) throw new InvalidArgumentError(`unknown dtype ${JSON.stringify(c.dtype)}`);
  const coll = benchCollective(c.collective);
  let redOp: BenchRedop | null = null;
  if (coll.reduces) {
    const op = c.redOp ?? 'sum';
    validateReduceOp(op, c.dtype);
    if (op !== 'sum' && op !== 'product' && op !== 'min' && op !== 'max' && op !== 'avg') {
      throw new InvalidArgumentError(`ReduceOp ${op} is not supported by NCCL (sum, product, min, max, avg)`);
    }
    redOp = op;
  }
  const root = coll.rooted ? checkInt('root', c.root ?? 0, 0, worldSize - 1) : null;
  return { collective: c.collective, dtype: c.dtype, redOp, root };
}

/** Checks the spec before anything touches the GPU or the store. */
export function validateNcclSweep(spec: NcclSweepSpec, deviceCount: number): SweepPlan {
  const worldSize = checkInt('worldSize', spec.worldSize, 1, 1 << 20);
  const rank = checkInt('rank', spec.rank, 0, worldSize - 1);
  if (!Array.isArray(spec.cases) || spec.cases.length === 0) throw new InvalidArgumentError('cases must name at least one collective');
  const cases = spec.cases.map((c) => planCase(c, worldSize));
  if (deviceCount < 1) throw new NcclUnavailableError('no CUDA device');
  const device = checkInt('device', spec.device, 0, deviceCount - 1);
  if (!Array.isArray(spec.sizes) || spec.sizes.length === 0) throw new InvalidArgumentError('sizes must be a non-empty array of byte counts');
  spec.sizes.forEach((s, i) => checkInt(`sizes[${i}]`, s, 0, Number.MAX_SAFE_INTEGER));
  if (typeof spec.key !== 'string' || spec.key === '') throw new InvalidArgumentError('key must be a non-empty store prefix');
  const modes = spec.modes ?? ['out-of-place', 'in-place'];
  if (modes.length === 0 || modes.some((m) => m !== 'out-of-place' && m !== 'in-place')) {
    throw new InvalidArgumentError(`modes must name out-of-place and/or in-place, got ${JSON.stringify(modes)}`);
  }
  return {
    rank,
    worldSize,
    device,
    cases,
    modes,
    // At least one: the first launches set up NCCL's connections lazily, and the sidecar aligns
    // the ranks and reports the slowest one only for runs with a warm-up.
    warmup: checkInt('warmup', spec.warmup ?? 5, 1, 1_000_000),
    iters: checkInt('iters', spec.iters ?? 20, 1, 1_000_000),
    verify: spec.verify ?? true,
    verifyMaxBytes: spec.verifyMaxBytes ?? Number.MAX_SAFE_INTEGER,
    timeoutMs: checkInt('timeoutMs', spec.timeoutMs ?? 300_000, 1, 24 * 3600_000),
  };
}

/** Runs the sweep on this rank; every rank calls it with the same spec but its rank and device. */
export async function runNcclSweep(sidecar: NcclSidecar, spec: NcclSweepSpec): Promise<NcclSweepRow[]> {
  const { client, hello } = sidecar.client(spec.cases[0]?.collective);
  const plan = validateNcclSweep(spec, hello.deviceCount);
  const { rank, worldSize: nranks, timeoutMs } = plan;
  spec.signal?.throwIfAborted();
  const comm = await NcclCommunicator.create(client, { store: spec.store, key: `${spec.key}/nccl/unique-id`, rank, nranks, device: plan.device, timeoutMs });
  // The sidecar answers abort at once, on its connection thread: a cancelled job's collective
  // (possibly hung on a peer) fails ABORTED instead of running to its timeout.
  const onCancel = () => void comm.abort();
  if (spec.signal?.aborted) onCancel();
  else spec.signal?.addEventListener('abort', onCancel, { once: true });
  const bufs: DeviceBuffers = { send: 0, recv: 0 };
  let healthy = false;
  try {
    // one pair of buffers for the whole sweep, as large as its largest step needs
    let sendBytes = 1;
    let recvBytes = 1;
    for (const c of plan.cases) {
      const es = elementSize(c.dtype);
      for (const s of spec.sizes) {
        const b = bufferBytes(benchCollective(c.collective).shape(s, es, nranks), es);
        sendBytes = Math.max(sendBytes, b.send);
        recvBytes = Math.max(recvBytes, b.recv);
      }
    }
    bufs.send = await client.alloc(plan.device, sendBytes, timeoutMs);
    bufs.recv = await client.alloc(plan.device, recvBytes, timeoutMs);
    const rows: NcclSweepRow[] = [];
    for (const c of plan.cases) {
      const coll = benchCollective(c.collective);
      const es = elementSize(c.dtype);
      for (const requested of spec.sizes) {
        const shape = coll.shape(requested, es, nranks);
        if (shape.count === 0) continue; // nccl-tests skips sizes below one element per rank
        for (const mode of plan.modes) {
          if (mode === 'in-place' && coll.inPlace === 'none') continue;
          const row = await runStep(client, comm.comm, plan, c, shape, mode, bufs);
          rows.push(row);
          spec.onRow?.(row);
        }
      }
    }
    healthy = true;
    return rows;
  } catch (e) {
    // once cancelled, what the next call meets (the communicator aborted and gone) is the cancel
    if (spec.signal?.aborted) throw new NcclError(`aborted: ${String(spec.signal.reason ?? 'cancelled')} (then: ${(e as Error).message})`, 'ABORTED');
    throw e;
  } finally {
    spec.signal?.removeEventListener('abort', onCancel);
    // destroy after a finished sweep (abort if that fails; its rows stand either way), abort
    // after a failed one (peers may be mid-collective); then the buffers
    await comm.close(healthy, timeoutMs);
    for (const b of [bufs.send, bufs.recv]) if (b) await client.free(b, timeoutMs).catch(() => undefined);
  }
}

/** One size in one mode: checked once (untimed), then timed on the GPU. */
async function runStep(
  client: SidecarClient,
  comm: number,
  plan: SweepPlan,
  c: PlannedCase,
  shape: BenchShape,
  mode: BenchMode,
  bufs: DeviceBuffers,
): Promise<NcclSweepRow> {
  const { rank, worldSize: nranks, timeoutMs } = plan;
  const coll = benchCollective(c.collective);
  const es = elementSize(c.dtype);
  const at = runLayout(coll.inPlace, mode, bufs, shape, es, rank);
  const request = {
    comm,
    collective: c.collective,
    count: shape.count,
    dtype: c.dtype,
    redOp: c.redOp ?? undefined,
    root: c.root ?? undefined,
    sendPeer: c.collective === 'sendRecv' ? (rank + 1) % nranks : undefined,
    recvPeer: c.collective === 'sendRecv' ? (rank - 1 + nranks) % nranks : undefined,
    ...at,
  };
  let wrong: number | null = null;
  if (plan.verify && shape.bytes <= plan.verifyMaxBytes) {
    const data = { rank, nranks, root: c.root ?? -1, redop: c.redOp ?? 'sum', count: shape.count } as const;
    if (at.resetBytes > 0) await client.memset(at.recvBuf, { bytes: at.resetBytes, value: RECV_SENTINEL_BYTE }, timeoutMs);
    const input = filledTensor(c.dtype, shape.sendCount, coll.input(data));
    await client.copyIn(at.sendBuf, new Uint8Array(input.buffer, input.byteOffset, input.byteLength), at.sendOffset, timeoutMs);
    await client.collective({ ...request, warmup: 0, iters: 1 }, timeoutMs);
    const expected = coll.expected(data);
    if (expected) {
      const got = await client.copyOut(at.recvBuf, shape.recvCount * es, at.recvOffset, timeoutMs);
      wrong = checkOutput(viewAs(alignedCopy(got), c.dtype), expected, data.redop, nranks);
    }
  }
  const timed = await client.collective({ ...request, warmup: plan.warmup, iters: plan.iters }, timeoutMs);
  const t = timed.deviceSeconds;
  const algbw = t > 0 ? shape.bytes / t : 0;
  return {
    collective: c.collective,
    dtype: c.dtype,
    redOp: c.redOp,
    root: c.root,
    mode,
    sizeBytes: shape.bytes,
    count: shape.count,
    timeSeconds: t,
    hostSeconds: timed.hostSeconds,
    algbwBytesPerSecond: algbw,
    busbwBytesPerSecond: algbw * coll.busBwFactor(nranks),
    wrong,
  };
}

/** A copy whose offset suits any dtype (a Buffer from the socket may start at an odd offset). */
function alignedCopy(b: Buffer): Uint8Array {
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}
