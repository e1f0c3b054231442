// The debug switch, like TORCH_DISTRIBUTED_DEBUG / NCCL_DEBUG=INFO: CMESH_DEBUG=INFO (or
// NODE_DEBUG=cmesh, through Node's util.debuglog) logs rendezvous steps, connections made and lost,
// algorithm choices and errors to stderr, one line each, prefixed with the rank. Off by default.
// Both variables are read once, when this module loads: a call site tests the `debugOn` constant
// before it builds its message, so when off the hot path pays one branch on a constant and no
// formatting (`if (debugOn) debug(...)`).
import { debuglog } from 'util';

const nodeDebug = debuglog('cmesh');

/** Whether CMESH_DEBUG turns logging on: INFO or DETAIL (any case), or 1/true. */
function debugLevelOn(value: string | undefined): boolean {
  return /^(info|detail|1|true)$/i.test((value ?? '').trim());
}

const viaCmeshDebug = debugLevelOn(process.env.CMESH_DEBUG);

/** True when CMESH_DEBUG=INFO or NODE_DEBUG=cmesh was set when the library loaded. */
export const debugOn: boolean = viaCmeshDebug || nodeDebug.enabled;

/** This process's rank as far as it is known (the rendezvous sets it; RANK before that). */
let debugRank: string = process.env.RANK ?? '?';

export function setDebugRank(rank: number): void {
  debugRank = String(rank);
}

/** One line to stderr: `[cmesh rank R] area: message`. Call it behind `if (debugOn)`. */
export function debug(area: string, message: string): void {
  if (!debugOn) return;
  const line = `[cmesh rank ${debugRank}] ${area}: ${message}`;
  if (viaCmeshDebug) process.stderr.write(`${line}\n`);
  else nodeDebug('%s', line);
}
