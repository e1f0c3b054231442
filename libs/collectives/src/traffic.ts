// Traffic counters: bytes each rank sent and received, per op and algorithm, so the seeds'
// traffic formulas (master-worker (P-1)·N, ring 2·(N/P)·(P-1), tree log2(P)·N) can be checked.
import type { Collective } from './ops/names';

export interface TrafficEntry {
  calls: number;
  bytesSent: number;
  bytesReceived: number;
}

export interface TrafficCounters {
  bytesSent: number;
  bytesReceived: number;
  /** Keyed "op/algorithm", e.g. "allReduce/ring", "send/p2p". */
  byOp: Record<string, TrafficEntry>;
}

export class TrafficCounter {
  private data: TrafficCounters = { bytesSent: 0, bytesReceived: 0, byOp: {} };
  /** byOp's entries by op, then algorithm: no key string is built per call */
  private entries = new Map<string, Map<string, TrafficEntry>>();

  /** `algorithm` is the collective's algorithm name, or "p2p" for send and recv. */
  record(op: Collective | 'send' | 'recv', algorithm: string, sent: number, received: number): void {
    let byAlgorithm = this.entries.get(op);
    if (!byAlgorithm) this.entries.set(op, (byAlgorithm = new Map()));
    let e = byAlgorithm.get(algorithm);
    if (!e) byAlgorithm.set(algorithm, (e = this.data.byOp[`${op}/${algorithm}`] ??= { calls: 0, bytesSent: 0, bytesReceived: 0 }));
    e.calls++;
    e.bytesSent += sent;
    e.bytesReceived += received;
    this.data.bytesSent += sent;
    this.data.bytesReceived += received;
  }

  snapshot(): TrafficCounters {
    return JSON.parse(JSON.stringify(this.data)) as TrafficCounters;
  }

  reset(): void {
    this.data = { bytesSent: 0, bytesReceived: 0, byOp: {} };
    this.entries = new Map();
  }
}
