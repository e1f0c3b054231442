// Collective observers: the metrics exporter (and anyone else) hears about every finished collective.
export interface CollectiveEvent {
  op: string;
  algorithm: string;
  backend: string;
  dtype: string;
  /** Bytes of the tensor the op works on (the per-rank size nccl-tests reports). */
  bytes: number;
  bytesSent: number;
  bytesReceived: number;
  durationSeconds: number;
  worldSize: number;
  rank: number;
  group: string;
  /** code: the CmeshError code (TIMEOUT, PEER_FAILURE, ...), or the error's name for others */
  error?: { name: string; message: string; code: string };
}

export type CollectiveObserver = (e: CollectiveEvent) => void;

const observers = new Set<CollectiveObserver>();

export function addCollectiveObserver(fn: CollectiveObserver): () => void {
  observers.add(fn);
  return () => observers.delete(fn);
}

/** Whether anyone listens: the hot path builds no event for nobody. */
export function hasCollectiveObservers(): boolean {
  return observers.size > 0;
}

export function notifyCollective(e: CollectiveEvent): void {
  for (const fn of observers) {
    try {
      fn(e);
    } catch {
      // an observer must never break a collective
    }
  }
}
