// What the agent's job execution needs from a job runner (one per backend a sweep may name: tcp,
// nccl): whether it can run here (and why not), and one job's sweep on this rank, streaming
// per-size samples, ended early through the abort signal.
import type { JobAssignment, SizeSamplesMsg } from '@cmesh/protocol';

export interface RunnerAvailability {
  ok: boolean;
  reason?: string;
}

export interface SweepHooks {
  onJoined(device: string): void;
  onSize(samples: SizeSamplesMsg): void;
}

export interface JobRunner {
  /** the backend a job's sweep names to run here */
  readonly name: 'tcp' | 'nccl';
  available(): RunnerAvailability;
  /** Brings back what went away (an NCCL sidecar), in the background; available() says when. */
  refresh?(): void;
  /** Resolves when this rank finished the sweep; rejects with the data plane's error. */
  run(assignment: JobAssignment, rank: number, hooks: SweepHooks, signal: AbortSignal): Promise<void>;
  stop(): Promise<void>;
}

/** Thrown when a job is ended from outside (cancel, another job took the agent). */
export class JobAbortedError extends Error {
  override name = 'JobAbortedError';
}
