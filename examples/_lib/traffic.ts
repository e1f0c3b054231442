// Totals of the library's traffic counters (dist.getTrafficCounters()) for this rank.
import * as dist from '@cmesh/collectives';

export interface TrafficTotals {
  sent: number;
  received: number;
  /** "op/algorithm" -> bytes, e.g. "send/p2p", "allReduce/ring" */
  byOp: Record<string, { sent: number; received: number }>;
}

export function trafficTotals(): TrafficTotals {
  const c = dist.getTrafficCounters();
  const byOp: TrafficTotals['byOp'] = {};
  for (const [k, e] of Object.entries(c.byOp)) byOp[k] = { sent: e.bytesSent, received: e.bytesReceived };
  return { sent: c.bytesSent, received: c.bytesReceived, byOp };
}
