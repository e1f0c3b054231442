// What becomes of a job given its pick: at submission it starts, queues (FIFO, drained on every
// tick and whenever a job ends) or is refused; once queued it starts, keeps waiting, or fails
// when it can never run or has waited QUEUE_LIMIT_MS. Pure: `now` comes in.
import { JobRequest } from '@cmesh/protocol';
import { PickResult } from './pick-policy';
import { AgentView } from './agent-directory';

/** A queued job that could not start within this time fails. */
export const QUEUE_LIMIT_MS = 10 * 60_000;

export type SubmitStep = { kind: 'start'; agents: AgentView[] } | { kind: 'queue'; reason: string } | { kind: 'refuse'; reason: string };

/** A new job: a job that must wait is refused when it asked to be (onBusy: 'refuse'). */
export function submitStep(pick: PickResult, onBusy: JobRequest['onBusy']): SubmitStep {
  if (pick.kind === 'run') return { kind: 'start', agents: pick.agents };
  if (pick.kind === 'never' || onBusy === 'refuse') return { kind: 'refuse', reason: pick.reason };
  return { kind: 'queue', reason: pick.reason };
}

export type QueuedStep = { kind: 'start'; agents: AgentView[] } | { kind: 'keep' } | { kind: 'fail'; reason: string };

/** A queued job on a drain of the queue. */
export function queuedStep(pick: PickResult, queuedAt: number, now: number): QueuedStep {
  if (pick.kind === 'run') return { kind: 'start', agents: pick.agents };
  if (pick.kind === 'never') return { kind: 'fail', reason: pick.reason };
  if (now - queuedAt > QUEUE_LIMIT_MS) return { kind: 'fail', reason: `waited ${QUEUE_LIMIT_MS} ms: ${pick.reason}` };
  return { kind: 'keep' };
}
