import { canCause } from './causes';
import { Fault } from './faults';

const fault = (kind: Fault['kind'], target: string): Fault => ({ kind, target, at: 0, recoveredAt: 1 });

describe('which failures a fault can cause', () => {
  it('a NATS server death explains a lost connection, JetStream away, silence, timeouts; never a wrong result or a refused request', () => {
    const nats = fault('kill-nats', 'nats-1');
    for (const reason of [
      'agent agent-3 (rank 1) failed: JetStreamNotEnabled: jetstream is not enabled',
      'agent-0 (rank 0), agent-1 (rank 1) lost: no message for 2506 ms',
      'DistTimeoutError: allReduce timed out after 10000 ms waiting for ranks [0]',
      'NatsConnectionLostError: join "g": the connection to NATS was lost for 12000 ms',
    ]) {
      expect([reason, canCause(nats, { reason })]).toEqual([reason, true]);
    }
    for (const reason of [
      'agent agent-0 (rank 0) failed: 3 wrong elements at 1024 bytes',
      'root 3 is not a rank of 2 agents',
      'agent agent-1 (rank 1) failed: out of memory',
    ]) {
      expect([reason, canCause(nats, { reason })]).toEqual([reason, false]);
    }
  });

  it('a rank fault explains only a failure that names that rank (a job) or hit the group on it (a service call)', () => {
    const kill = fault('kill-agent', 'agent-2');
    expect(canCause(kill, { reason: 'agent agent-2 (rank 1) lost: no message for 2500 ms', failedAgent: 'agent-2' })).toBe(true);
    expect(canCause(kill, { reason: 'agent agent-1 (rank 0) lost: no message for 2500 ms', failedAgent: 'agent-1' })).toBe(false);
    expect(canCause(kill, { reason: 'PeerFailureError: peer closed', agents: ['agent-2', 'agent-3'] })).toBe(true);
    expect(canCause(kill, { reason: 'PeerFailureError: peer closed', agents: ['agent-0', 'agent-1'] })).toBe(false);
  });

  it("a coordinator replica's death explains the jobs that name it and service joins, not a group's ops", () => {
    const kill = fault('kill-replica', 'replica-0');
    expect(canCause(kill, { reason: 'the coordinator replica running it (replica-0) stopped; its agents were taken over' })).toBe(true);
    expect(canCause(kill, { reason: 'the coordinator replica running it (replica-1) stopped; its agents were taken over' })).toBe(false);
    expect(canCause(kill, { reason: 'DistTimeoutError: join "g": no coordinator answered', agents: [], join: true })).toBe(true);
    expect(canCause(kill, { reason: 'DistTimeoutError: allReduce timed out', agents: ['agent-0'] })).toBe(false);
  });
});
