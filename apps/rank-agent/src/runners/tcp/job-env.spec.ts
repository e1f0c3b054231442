import type { JobAssignment } from '@cmesh/protocol';
import { jobEnv } from './job-env';

const member = (rank: number, host: string) => ({ agentId: `a${rank}`, name: `agent-${rank}`, rank, host });
const job = (jobId: string, members: JobAssignment['members']) => ({ jobId, members }) as JobAssignment;

describe('jobEnv', () => {
  const worker = { PATH: '/bin', CMESH_DATA_PORTS: '9000-9010', LOCAL_RANK: '3', CMESH_ALGO: 'tree' };

  it("gives each job of a reused worker its own settings, over the worker's environment", () => {
    const two = jobEnv(job('j1', [member(0, 'h'), member(1, 'h')]), 1, 'ring', worker);
    expect(two).toEqual({ PATH: '/bin', CMESH_DATA_PORTS: '9000-9010', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', CMESH_ALGO: 'ring', CMESH_TRACE_JOB: 'j1' });
    const alone = jobEnv(job('j2', [member(0, 'h'), member(1, 'other')]), 0, undefined, worker);
    expect(alone).toEqual({ PATH: '/bin', CMESH_DATA_PORTS: '9000-9010', LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '1', CMESH_TRACE_JOB: 'j2' });
    // the worker's own environment is left as it was
    expect(worker).toEqual({ PATH: '/bin', CMESH_DATA_PORTS: '9000-9010', LOCAL_RANK: '3', CMESH_ALGO: 'tree' });
  });

  it("clears what the job does not know (the agent's own LOCAL_RANK) and sets the node numbers it has", () => {
    expect(jobEnv(job('j3', [{ agentId: 'a0', name: 'agent-0', rank: 0 }]), 0, undefined, worker)).toEqual({
      PATH: '/bin',
      CMESH_DATA_PORTS: '9000-9010',
      CMESH_TRACE_JOB: 'j3',
    });
    const byNode = [{ ...member(0, '10.0.0.1'), node: 'n1', localRank: 0, localWorldSize: 1, groupRank: 1, groupWorldSize: 2 }];
    expect(jobEnv(job('j4', byNode), 0, 'direct', {})).toEqual({
      LOCAL_RANK: '0',
      LOCAL_WORLD_SIZE: '1',
      GROUP_RANK: '1',
      GROUP_WORLD_SIZE: '2',
      CMESH_ALGO: 'direct',
      CMESH_TRACE_JOB: 'j4',
    });
  });
});
