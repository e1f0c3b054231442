import type { Comm } from '../../transport/comm';
import type { ReduceOp } from '../../reduce-op';
import type { Tensor } from '../../tensor/dtype';
import type { Scratch } from '../scratch';

/**
 * Reduce-scatter: `input` is this rank's contribution to every rank, laid out block after block
 * (block i has counts[i] elements); rank i's `output` (counts[i] elements) receives op over all
 * ranks' block i. `input` is left unchanged.
 */
export type ReduceScatterFn = (
  comm: Comm,
  input: Tensor,
  output: Tensor,
  counts: readonly number[],
  op: ReduceOp,
  scratch: Scratch,
) => Promise<void>;

export function offsetsOf(counts: readonly number[]): number[] {
  const off = new Array<number>(counts.length + 1);
  off[0] = 0;
  for (let i = 0; i < counts.length; i++) off[i + 1] = off[i] + counts[i];
  return off;
}
