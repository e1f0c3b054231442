// Op signatures on the wire (opcode, dtype, root, count) and their human-readable form for
// CollectiveMismatchError.
import { DTYPES, DType } from '../tensor/dtype';
import { ANY_COUNT, OpSignature } from '../transport/frame';
import type { Collective } from './names';

/** Wire codes of the collectives (fixed: peers of one version compare them). */
const OPCODES: Readonly<Record<Collective, number>> = {
  broadcast: 1,
  reduce: 2,
  allReduce: 3,
  gather: 4,
  allGather: 5,
  scatter: 6,
  reduceScatter: 7,
  allToAll: 8,
  barrier: 9,
};

const NAMES = Object.fromEntries(Object.entries(OPCODES).map(([k, v]) => [v, k])) as Record<number, string>;

export function signature(op: Collective, dtype: DType | undefined, count: number | undefined, root = -1): OpSignature {
  return { opcode: OPCODES[op], dtype: dtype ? DTYPES.indexOf(dtype) + 1 : 0, root, count: count ?? ANY_COUNT };
}

export function describeSignature(s: OpSignature): string {
  const parts: string[] = [];
  if (s.dtype) parts.push(DTYPES[s.dtype - 1]);
  if (s.count !== ANY_COUNT) parts.push(`count=${s.count}`);
  if (s.root >= 0) parts.push(`root=${s.root}`);
  return `${NAMES[s.opcode] ?? `op#${s.opcode}`}(${parts.join(', ')})`;
}
