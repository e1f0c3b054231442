// One NCCL communicator on the sidecar and the two device buffers its collectives use (send and
// receive, grown on demand). Created through the store as torch does (rank 0's unique id);
// ended by destroy after a healthy run or abort after any failure, always before its buffers are
// freed: cudaFree synchronises the device, so freeing under a collective still queued would hang.
import type { Store } from '../../store';
import type { CollectiveRequest, CollectiveResult, CommInfo } from './protocol';
import type { SidecarClient } from './sidecar-client';
import { exchangeUniqueId } from './unique-id';

/** Bound for clean-up requests (abort, finalize, free) (ms). */
export const CLEANUP_TIMEOUT_MS = 15_000;

export interface CommunicatorSpec {
  store: Store;
  /** Store key of this communicator's unique id; unique to it (a job, a process group). */
  key: string;
  rank: number;
  nranks: number;
  /** This rank's CUDA device. */
  device: number;
  /** Bounds the wait for the unique id and the communicator's creation (ms). */
  timeoutMs: number;
}

/** A collective on this communicator's buffers: everything but the handles. */
export type BufferCollective = Omit<CollectiveRequest, 'comm' | 'sendBuf' | 'recvBuf'>;

export class NcclCommunicator {
  private send = { buf: 0, bytes: 0 };
  private recv = { buf: 0, bytes: 0 };
  private ended = false;

  private constructor(
    private readonly client: SidecarClient,
    readonly comm: number,
    readonly device: number,
    /** whether its ops launch on a blocking communicator (see the sidecar's README) */
    readonly launches: CommInfo['launches'],
  ) {}

  /** Every rank of the communicator calls it with the same key and nranks. */
  static async create(client: SidecarClient, spec: CommunicatorSpec): Promise<NcclCommunicator> {
    const uniqueId = await exchangeUniqueId(client, spec.store, spec.key, spec.rank, spec.timeoutMs);
    const info = await client.commInitRank({ nranks: spec.nranks, rank: spec.rank, uniqueId, device: spec.device }, spec.timeoutMs);
    return new NcclCommunicator(client, info.comm, spec.device, info.launches);
  }

  /** Whether destroy or abort has ended it. */
  get isEnded(): boolean {
    return this.ended;
  }

  get sendBuf(): number {
    return this.send.buf;
  }

  get recvBuf(): number {
    return this.recv.buf;
  }

  /** Makes the buffers at least this large (at least 1 byte each: NCCL wants real pointers even for unused ones). */
  async reserve(sendBytes: number, recvBytes: number, timeoutMs: number): Promise<void> {
    await this.grow(this.send, Math.max(1, sendBytes), timeoutMs);
    await this.grow(this.recv, Math.max(1, recvBytes), timeoutMs);
  }

  private async grow(b: { buf: number; bytes: number }, bytes: number, timeoutMs: number): Promise<void> {
    if (b.bytes >= bytes) return;
    // no collective of this communicator is queued between its ops, so the old buffer can go first
    if (b.buf) await this.client.free(b.buf, timeoutMs);
    b.buf = 0;
    b.bytes = 0;
    b.buf = await this.client.alloc(this.device, bytes, timeoutMs);
    b.bytes = bytes;
  }

  collective(req: BufferCollective, timeoutMs: number): Promise<CollectiveResult> {
    return this.client.collective({ ...req, comm: this.comm, sendBuf: this.send.buf, recvBuf: this.recv.buf }, timeoutMs);
  }

  /** Writes `data` at the start of the send buffer (in pieces of the sidecar's frame limit). */
  writeSend(data: Uint8Array, timeoutMs: number): Promise<void> {
    return this.client.copyIn(this.send.buf, data, 0, timeoutMs);
  }

  /** Sets the first `bytes` of the receive buffer to `value`. */
  fillRecv(bytes: number, value: number, timeoutMs: number): Promise<void> {
    return this.client.memset(this.recv.buf, { bytes, value }, timeoutMs);
  }

  /** Reads the first `bytes` of the receive buffer. */
  readRecv(bytes: number, timeoutMs: number): Promise<Buffer> {
    return this.client.copyOut(this.recv.buf, bytes, 0, timeoutMs);
  }

  /** Aborts the communicator now (also interrupting a collective in flight); once, never throws. */
  async abort(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.client.abort(this.comm, CLEANUP_TIMEOUT_MS).catch(() => undefined);
  }

  /**
   * Ends the communicator, then frees its buffers. `healthy`: finalize with the peers, bounded,
   * aborting if that fails (a peer gone after its last op must not hold this rank); otherwise
   * abort (peers may be mid-collective).
   */
  async close(healthy: boolean, timeoutMs = CLEANUP_TIMEOUT_MS): Promise<void> {
    if (!this.ended) {
      if (healthy) {
        this.ended = true;
        await this.client
          .destroy(this.comm, Math.min(timeoutMs, CLEANUP_TIMEOUT_MS))
          .catch(() => this.client.abort(this.comm, CLEANUP_TIMEOUT_MS).catch(() => undefined));
      } else {
        await this.abort();
      }
    }
    for (const b of [this.send, this.recv]) {
      if (b.buf) await this.client.free(b.buf, CLEANUP_TIMEOUT_MS).catch(() => undefined);
      b.buf = 0;
      b.bytes = 0;
    }
  }
}
