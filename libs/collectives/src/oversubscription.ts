// Whether this node runs more ranks than it has cores (LOCAL_WORLD_SIZE, set by the launcher and
// the agents). Then ranks take turns on the cores: busy-polling and algorithms whose ranks must
// all run at once (a pipelined chain) lose.
import * as os from 'os';

export function localRanks(env: Record<string, string | undefined> = process.env): number | undefined {
  const n = Number(env.LOCAL_WORLD_SIZE);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

export function isOversubscribed(env: Record<string, string | undefined> = process.env, cores = os.availableParallelism()): boolean {
  const n = localRanks(env);
  return n !== undefined && n > cores;
}
