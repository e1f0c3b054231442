import type { AgentRecord } from '@cmesh/protocol';
import { chooseBackend, ncclWhyNot } from './choose-backend';

const agent = (name: string, nccl: boolean): AgentRecord => ({
  protocolVersion: 1,
  agentId: name,
  name,
  host: '127.0.0.1',
  device: { kind: nccl ? 'gpu' : 'cpu', index: 0 },
  backends: [{ name: 'tcp', available: true }, nccl ? { name: 'nccl', available: true } : { name: 'nccl', available: false, reason: 'no CUDA device' }],
  dataPlane: { host: '127.0.0.1' },
  state: 'ready',
  registeredAt: '',
  lastHeartbeat: '',
  maxHeartbeatGapSeconds: 0,
});
const gpu = [agent('g0', true), agent('g1', true), agent('g2', true)];
const cpu = [agent('c0', false), agent('c1', false)];
const names = (r: { backend: string; able: AgentRecord[]; idle: AgentRecord[] }) => ({
  backend: r.backend,
  able: r.able.map((a) => a.name),
  idle: r.idle.map((a) => a.name),
});

describe('chooseBackend', () => {
  it('auto: nccl on the nccl agents when enough of them are idle', () => {
    expect(names(chooseBackend({ size: 2 }, [...gpu, ...cpu], [gpu[0], cpu[0], gpu[2]]))).toEqual({
      backend: 'nccl',
      able: ['g0', 'g1', 'g2'],
      idle: ['g0', 'g2'],
    });
  });

  it('auto: tcp on any agents when too few nccl agents are idle', () => {
    expect(names(chooseBackend({ size: 3 }, [...gpu, ...cpu], [gpu[0], cpu[0], gpu[2]]))).toEqual({
      backend: 'tcp',
      able: ['g0', 'g1', 'g2', 'c0', 'c1'],
      idle: ['g0', 'c0', 'g2'],
    });
    // a mesh without nccl: tcp, as before there was a choice
    expect(chooseBackend({ size: 2 }, cpu, cpu).backend).toBe('tcp');
  });

  it('tcp asked: tcp even on nccl agents', () => {
    expect(names(chooseBackend({ size: 2, backend: 'tcp' }, gpu, gpu))).toEqual({ backend: 'tcp', able: ['g0', 'g1', 'g2'], idle: ['g0', 'g1', 'g2'] });
  });

  it('nccl asked: only the nccl agents, busy ones counted as able (the round waits for them)', () => {
    expect(names(chooseBackend({ size: 3, backend: 'nccl' }, [...gpu, ...cpu], [gpu[0], ...cpu]))).toEqual({
      backend: 'nccl',
      able: ['g0', 'g1', 'g2'],
      idle: ['g0'],
    });
    expect(names(chooseBackend({ size: 2, backend: 'nccl' }, cpu, cpu))).toEqual({ backend: 'nccl', able: [], idle: [] });
  });

  it('names why agents lack nccl, agents that share a reason together', () => {
    expect(ncclWhyNot([...gpu, ...cpu])).toBe(' (c0, c1: no CUDA device)');
    const many = ['c0', 'c1', 'c2', 'c3', 'c4'].map((n) => agent(n, false));
    many[4].backends[1].reason = 'NCCL library not found';
    expect(ncclWhyNot(many)).toBe(' (c0, c1, c2 and 1 more: no CUDA device; c4: NCCL library not found)');
    const odd = ['d0', 'd1', 'd2', 'd3'].map((n, i) => ({
      ...agent(n, false),
      backends: [
        { name: 'tcp' as const, available: true },
        { name: 'nccl' as const, available: false, reason: `reason ${i}` },
      ],
    }));
    expect(ncclWhyNot(odd)).toBe(' (d0: reason 0; d1: reason 1; d2: reason 2; 1 other reasons)');
    expect(ncclWhyNot(gpu)).toBe('');
  });
});
