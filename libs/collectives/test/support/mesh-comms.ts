// In-process ranks over the library's own data plane, for testing algorithms: one Mesh per rank
// (the production transport: TCP, or shared memory with `transport`), joined through a TcpStore,
// and per op an OpComm, the Comm a ProcessGroup hands its algorithms. A rank's OpComm is wrapped
// only to count bytes per peer (from the op's start), so traffic formulas can be checked hop by hop.
// Ranks can be placed on "hosts" of their own (a host identity each) for the hierarchical algorithms.
import { TcpStore } from '../../src/store/tcp-store';
import type { Comm } from '../../src/transport/comm';
import { Mesh } from '../../src/transport/mesh';
import { OpComm } from '../../src/transport/op-comm';
import { NO_SIGNATURE } from '../../src/transport/frame';

const GROUP = 0;
const TIMEOUT_MS = 10_000;

/** One rank's Comm, bound to one op at a time, with bytes counted per peer. */
export class CountingComm implements Comm {
  bytesSent = 0;
  bytesReceived = 0;
  readonly sentTo: number[];
  private inner!: OpComm;

  get hosts(): readonly number[] | undefined {
    return this.inner.hosts;
  }

  constructor(
    readonly rank: number,
    readonly size: number,
  ) {
    this.sentTo = new Array(size).fill(0);
  }

  /** Binds the next op's OpComm and zeroes the counters. */
  startOp(inner: OpComm): void {
    this.inner = inner;
    this.bytesSent = this.bytesReceived = 0;
    this.sentTo.fill(0);
  }

  send(peer: number, data: Uint8Array): Promise<void> {
    this.bytesSent += data.byteLength;
    this.sentTo[peer] += data.byteLength;
    return this.inner.send(peer, data);
  }

  async recv(peer: number, into: Uint8Array): Promise<void> {
    await this.inner.recv(peer, into);
    this.bytesReceived += into.byteLength;
  }
}

export class MeshComms {
  /** Each rank's Comm, counting for the op in progress (or the last one). */
  readonly comms: CountingComm[];
  private tag = 0;

  private constructor(
    private readonly meshes: Mesh[],
    private readonly stores: TcpStore[],
  ) {
    this.comms = meshes.map((m, r) => new CountingComm(r, m.size));
  }

  /** `hosts`: a host identity per rank (ranks with the same one are on one "host"); default the real one. */
  static async create(size: number, transport: 'tcp' | 'auto' = 'tcp', hosts?: readonly string[]): Promise<MeshComms> {
    const master = await TcpStore.create({ host: '127.0.0.1', port: 0, isMaster: true, timeoutMs: TIMEOUT_MS });
    const stores = [
      master,
      ...(await Promise.all(Array.from({ length: size - 1 }, () => TcpStore.create({ host: '127.0.0.1', port: master.port, timeoutMs: TIMEOUT_MS })))),
    ];
    const meshes = await Promise.all(
      stores.map((store, rank) => Mesh.create({ rank, size, store, timeoutMs: TIMEOUT_MS, masterAddr: '127.0.0.1', transport, hostId: hosts?.[rank] })),
    );
    return new MeshComms(meshes, stores);
  }

  /** Binds every rank's Comm to the next op: one new tag for all, as a collective's seq. */
  nextOp(): CountingComm[] {
    const tag = ++this.tag;
    const ranks = this.meshes.map((_, r) => r);
    this.meshes.forEach((m, r) => this.comms[r].startOp(new OpComm(m, r, m.size, ranks, GROUP, tag, NO_SIGNATURE, m.hostsOf(ranks))));
    return this.comms;
  }

  async close(): Promise<void> {
    await Promise.all(this.meshes.map((m) => m.close()));
    // clients first, then the master that serves them
    for (const s of [...this.stores].reverse()) await s.close();
  }
}
