import { bindToCore, coreFor, launcherBinding, parseCpuList, planBinding, planRankBinding } from './core-binding';

describe('core binding', () => {
  it('parses kernel CPU lists', () => {
    expect(parseCpuList('0-1')).toEqual([0, 1]);
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList('5')).toEqual([5]);
    expect(() => parseCpuList('3-1')).toThrow(/bad CPU list/);
  });

  it('gives local ranks the allowed cores in turn', () => {
    expect([0, 1, 2, 3].map((r) => coreFor(r, [2, 5, 7]))).toEqual([2, 5, 7, 2]);
  });

  it('binds busy-polling ranks that share a node, and nothing else unless asked', () => {
    const cores = [0, 1, 2, 3];
    expect(planBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' }, true, cores)).toEqual({ cpu: 1 });
    expect(planBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' }, false, cores)).toEqual({ skipped: 'ranks do not busy-poll' });
    expect(planBinding({ LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '1' }, true, cores)).toEqual({ skipped: 'the only rank on this node' });
    expect(planBinding({ LOCAL_WORLD_SIZE: '2' }, true, cores)).toEqual({ skipped: 'LOCAL_RANK is not set' });
    expect(planBinding({ LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '2' }, true, [3])).toEqual({ skipped: 'one core allowed' });
    expect(planBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', CMESH_BIND: 'none' }, true, cores)).toEqual({ skipped: 'CMESH_BIND=none' });
    expect(planBinding({ LOCAL_RANK: '2', CMESH_BIND: 'core' }, false, cores)).toEqual({ cpu: 2 });
    expect(planBinding({ LOCAL_RANK: '2', CMESH_BIND: 'socket' }, true, cores)).toEqual({ skipped: 'CMESH_BIND=socket is not core or none' });
  });

  it("plans with the data plane's own busy-poll decision (CMESH_SPIN_US, LOCAL_WORLD_SIZE)", () => {
    const cores = [0, 1];
    expect(planRankBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', CMESH_SPIN_US: '200' }, cores)).toEqual({ cpu: 1 });
    // more local ranks than cores: nobody spins, so nobody is bound by default
    expect(planRankBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '100000' }, cores)).toEqual({ skipped: 'ranks do not busy-poll' });
    expect(planRankBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', CMESH_SPIN_US: '0' }, cores)).toEqual({ skipped: 'ranks do not busy-poll' });
    expect(planRankBinding({ LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2', CMESH_SPIN_US: '0', CMESH_BIND: 'core' }, cores)).toEqual({ cpu: 1 });
  });

  it("reads the launcher's request (CMESH_RUN_BIND_CPU) and nothing else", () => {
    expect(launcherBinding({})).toBeUndefined();
    expect(launcherBinding({ CMESH_BIND: 'core', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' })).toBeUndefined();
    expect(launcherBinding({ CMESH_RUN_BIND_CPU: '' })).toBeUndefined();
    expect(launcherBinding({ CMESH_RUN_BIND_CPU: '3' })).toBe(3);
    expect(() => launcherBinding({ CMESH_RUN_BIND_CPU: 'x' })).toThrow(/CMESH_RUN_BIND_CPU must be a CPU number/);
    expect(() => bindToCore({ cpu: -1 })).toThrow(/cpu must be a non-negative integer/);
  });
});
