// Injection tokens of the execution module.
import type { JobAssignment, SizeSamplesMsg } from '@cmesh/protocol';

/** Record<backend name, JobRunner>: the job runners of this agent */
export const JOB_RUNNERS = Symbol('JOB_RUNNERS');

/** Where job results go besides the coordinator (the agent's metrics). */
export const JOB_OBSERVER = Symbol('JOB_OBSERVER');
export interface JobObserver {
  onSize(a: JobAssignment, rank: number, samples: SizeSamplesMsg): void;
  onError(a: JobAssignment, reason: string): void;
}
