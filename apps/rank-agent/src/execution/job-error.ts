// A thrown error as the job protocol carries it: name, message, code and the peers the data
// plane blamed (PeerFailureError's context.peers), so the coordinator can name the agent.
import type { JobError } from '@cmesh/protocol';

export function errorToJobError(err: unknown): JobError {
  const e = err as { name?: string; message?: string; code?: unknown; peers?: unknown; context?: { peers?: unknown } };
  const raw = Array.isArray(e?.context?.peers) ? e.context!.peers : Array.isArray(e?.peers) ? e.peers : undefined;
  const peers = raw ? (raw as unknown[]).filter((p): p is number => Number.isInteger(p)) : undefined;
  return {
    name: typeof e?.name === 'string' ? e.name : 'Error',
    message: typeof e?.message === 'string' ? e.message : String(err),
    code: typeof e?.code === 'string' ? e.code : undefined,
    peers: peers && peers.length ? peers : undefined,
  };
}
