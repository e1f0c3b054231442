// Capability checks: a call the group's backend cannot run fails with BackendUnsupportedError
// naming the backend, the op and what it has instead, before a sequence number is taken.
import { BackendUnsupportedError } from '../errors';
import type { Collective } from '../ops/names';
import type { ReduceOp } from '../reduce-op';
import type { DType } from '../tensor/dtype';
import type { BackendCapabilities, BackendKind } from './backend';

function refuse(backend: BackendKind, op: string, what: string, caps: BackendCapabilities): never {
  const note = caps.notes?.[op as Collective];
  throw new BackendUnsupportedError(`${op}: ${what} is not supported by the ${backend} backend${note ? ` (${note})` : ''}`, backend, { op });
}

function list(set: ReadonlySet<string>): string {
  return [...set].join(', ');
}

export function checkCollective(backend: BackendKind, caps: BackendCapabilities, op: Collective, dtype?: DType, redOp?: ReduceOp): void {
  if (!caps.collectives.has(op)) refuse(backend, op, op, caps);
  if (dtype !== undefined && !caps.dtypes.has(dtype)) refuse(backend, op, `dtype ${dtype} (it has ${list(caps.dtypes)})`, caps);
  if (redOp !== undefined && !caps.reduceOps.has(redOp)) {
    refuse(backend, op, `ReduceOp.${redOp.toUpperCase()} (it has ${list(caps.reduceOps)})`, caps);
  }
}

export function checkP2P(backend: BackendKind, caps: BackendCapabilities, op: 'send' | 'recv', dtype: DType, anySource: boolean): void {
  if (!caps.p2p) refuse(backend, op, op, caps);
  if (!caps.dtypes.has(dtype)) refuse(backend, op, `dtype ${dtype} (it has ${list(caps.dtypes)})`, caps);
  if (anySource && !caps.recvAnySource) refuse(backend, op, 'recv from any source (pass src)', caps);
}

export function checkAlgorithmOption(backend: BackendKind, caps: BackendCapabilities, op: Collective, algorithm: string | undefined): void {
  if (algorithm !== undefined && !caps.algorithms) {
    refuse(backend, op, `the algorithm option (${JSON.stringify(algorithm)}; the backend picks its own)`, caps);
  }
}

/** allToAll blocks of different sizes, where the backend needs them equal (call it only then). */
export function checkEvenBlocks(backend: BackendKind, caps: BackendCapabilities, op: string, lengths: readonly number[]): void {
  if (lengths.some((n) => n !== lengths[0])) refuse(backend, op, `blocks of different sizes ([${lengths.join(', ')}] elements)`, caps);
}
