// The settings one job's process group reads (initProcessGroup's `env`), as torchrun would give
// a rank: the worker's own environment (what the agent forked it with) and the job's numbers,
// algorithm and id. process.env itself is never changed, so a reused worker cannot carry one
// job's settings into the next.
import type { JobAssignment } from '@cmesh/protocol';
import { localRanks } from './local-ranks';

/** What a job sets, or clears when it has no value (the agent's own LOCAL_RANK in node mode is not the job's). */
const JOB_SETTINGS = ['LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'GROUP_WORLD_SIZE', 'CMESH_ALGO', 'CMESH_TRACE_JOB'] as const;

export function jobEnv(assignment: JobAssignment, rank: number, algorithm: string | undefined, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const local = localRanks(assignment.members, rank);
  const job: Record<(typeof JOB_SETTINGS)[number], string | number | undefined> = {
    LOCAL_RANK: local?.localRank,
    LOCAL_WORLD_SIZE: local?.localWorldSize,
    GROUP_RANK: local?.groupRank,
    GROUP_WORLD_SIZE: local?.groupWorldSize,
    // the cost model's override for this job's sweep
    CMESH_ALGO: algorithm,
    // the flight recorder answers the coordinator for this job (GET /groups/{jobId}/trace)
    CMESH_TRACE_JOB: assignment.jobId,
  };
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of JOB_SETTINGS) {
    const v = job[k];
    if (v === undefined) delete env[k];
    else env[k] = String(v);
  }
  return env;
}
