// Which library backend a service group runs on, and so which agents it may be placed on. Pure:
// the service passes the registered agents (with their backends as they last advertised them)
// and the idle ones.
import type { AgentRecord, ServiceGroupBackend, ServiceGroupRound } from '@cmesh/protocol';

/** The agent advertises that backend as working (for nccl: its sidecar found a GPU and NCCL, and is up). */
const hasBackend = (a: AgentRecord, name: ServiceGroupBackend) => a.backends.some((b) => b.name === name && b.available);

/**
 * The backend a round runs on and the agents it may be placed on: nccl asked, the agents with a
 * working nccl backend; tcp asked, any; auto, the nccl ones when enough of them are idle now (the
 * round runs on nccl), else any, on tcp (fewer idle nccl agents than members: whichever agents are
 * picked, one lacks it). `able`: the agents it could run on once idle (fewer than its size: it
 * cannot be placed; more, it waits for them).
 */
export function chooseBackend<A extends AgentRecord>(
  round: Pick<ServiceGroupRound, 'size' | 'backend'>,
  able: A[],
  idle: A[],
): { backend: ServiceGroupBackend; able: A[]; idle: A[] } {
  const nccl = { backend: 'nccl' as const, able: able.filter((a) => hasBackend(a, 'nccl')), idle: idle.filter((a) => hasBackend(a, 'nccl')) };
  if (round.backend === 'nccl') return nccl;
  if (round.backend === undefined && nccl.idle.length >= round.size) return nccl;
  return { backend: 'tcp', able, idle };
}

/** Why the other agents have no nccl backend, as they registered it: agents that share a reason together, the first few of each. */
export function ncclWhyNot(agents: AgentRecord[]): string {
  const byReason = new Map<string, string[]>();
  for (const a of agents) {
    if (hasBackend(a, 'nccl')) continue;
    const reason = a.backends.find((b) => b.name === 'nccl')?.reason ?? 'no nccl backend';
    byReason.set(reason, [...(byReason.get(reason) ?? []), a.name]);
  }
  const few = (names: string[]) => `${names.slice(0, 3).join(', ')}${names.length > 3 ? ` and ${names.length - 3} more` : ''}`;
  const parts = [...byReason].slice(0, 3).map(([reason, names]) => `${few(names)}: ${reason}`);
  if (byReason.size > 3) parts.push(`${byReason.size - 3} other reasons`);
  return parts.length ? ` (${parts.join('; ')})` : '';
}
