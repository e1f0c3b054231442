// Which failures a fault can cause. A fault explains a failure only when the failure is of a kind
// that fault produces, not merely because the two overlapped in time: a rank's death or pause
// explains failures that name that rank; a coordinator replica's death explains a job that names
// the replica, and a service join left unanswered; a NATS server's death explains what a lost
// connection looks like (JetStream unavailable or re-electing, messages and heartbeats missing,
// timeouts, a member silent) and never a wrong result or a refused request.
import { Fault } from './faults';

/** What losing a NATS server (its connections, in-flight messages and JetStream replica) can look like. */
export const NATS_SYMPTOMS =
  /jetstream|\bnats\b|connection|disconnect|no message for|not heard|silent|stopped talking|timed? ?out|no responders|\b503\b|unavailable|closed|\bstore\b|stream|reconnect|\blost\b|left the group|no answer/i;
/** What no fault of the soak can cause: the mesh computing or accepting something wrong. */
const NEVER = /\bwrong\b|mismatch|invalid|not a rank|BAD_REQUEST/i;

export interface FailureSeen {
  /** the job's reason, or the service error's name and message */
  reason: string;
  /** the agent a job's failure blames */
  failedAgent?: string;
  /** the agents a service group ran on (empty: not placed) */
  agents?: string[];
  /** a service join (answered by a coordinator replica), not an op */
  join?: boolean;
}

export function canCause(f: Fault, x: FailureSeen): boolean {
  if (NEVER.test(x.reason)) return false;
  switch (f.kind) {
    case 'kill-agent':
    case 'pause-rank':
      // a job names the rank it blames; a service group failed on one of its agents
      if (x.agents) return !x.agents.length || x.agents.includes(f.target);
      return x.failedAgent === f.target || x.reason.includes(f.target);
    case 'kill-replica':
      return x.agents ? !!x.join : x.reason.includes(f.target);
    case 'kill-nats':
      return NATS_SYMPTOMS.test(x.reason);
  }
}
