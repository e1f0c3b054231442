import { AgentView } from './agent-directory';
import { PickResult } from './pick-policy';
import { QUEUE_LIMIT_MS, queuedStep, submitStep } from './queue-policy';

const agents: AgentView[] = [{ agentId: 'x', name: 'a0', alive: true }];
const run: PickResult = { kind: 'run', agents };
const busy: PickResult = { kind: 'wait', reason: 'agents busy: a0 (job j1)' };
const never: PickResult = { kind: 'never', reason: 'agent a0 is not alive (no heartbeat)' };

describe('queue policy', () => {
  it('a new job starts, queues, or is refused when it asked to be or can never run', () => {
    expect(submitStep(run, 'wait')).toEqual({ kind: 'start', agents });
    expect(submitStep(busy, 'wait')).toEqual({ kind: 'queue', reason: busy.reason });
    expect(submitStep(busy, 'refuse')).toEqual({ kind: 'refuse', reason: busy.reason });
    expect(submitStep(never, 'wait')).toEqual({ kind: 'refuse', reason: never.reason });
  });

  it('a queued job waits while its agents are busy, and fails once it has waited QUEUE_LIMIT_MS', () => {
    const queuedAt = 5_000;
    expect(queuedStep(busy, queuedAt, queuedAt + 1)).toEqual({ kind: 'keep' });
    expect(queuedStep(busy, queuedAt, queuedAt + QUEUE_LIMIT_MS)).toEqual({ kind: 'keep' });
    expect(queuedStep(busy, queuedAt, queuedAt + QUEUE_LIMIT_MS + 1)).toEqual({ kind: 'fail', reason: `waited ${QUEUE_LIMIT_MS} ms: ${busy.reason}` });
  });

  it('a queued job starts once its agents are free, and fails at once when it can never run', () => {
    expect(queuedStep(run, 0, QUEUE_LIMIT_MS * 2)).toEqual({ kind: 'start', agents });
    expect(queuedStep(never, 0, 1)).toEqual({ kind: 'fail', reason: never.reason });
  });
});
