// Messages between the agent and the child process that runs one job's tcp sweep.
import type { JobAssignment, JobError, SizeSamplesMsg } from '@cmesh/protocol';

/** `algorithm` is CMESH_ALGO for this job's process group (the cost model's override). */
export type ToWorker = { type: 'run'; assignment: JobAssignment; rank: number; natsUrl: string; algorithm?: string };

export type FromWorker =
  /** loaded and waiting for a job (sent once, at start) */
  { type: 'ready' } | { type: 'joined'; device: string } | { type: 'size'; samples: SizeSamplesMsg } | { type: 'done' } | { type: 'failed'; error: JobError };
