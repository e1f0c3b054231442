// Reduction operators (torch.distributed.ReduceOp) and which dtypes each accepts.
import { InvalidArgumentError } from './errors';
import { DType, isFloatDType } from './tensor/dtype';

export const ReduceOp = {
  SUM: 'sum',
  AVG: 'avg',
  PRODUCT: 'product',
  MIN: 'min',
  MAX: 'max',
  BAND: 'band',
  BOR: 'bor',
  BXOR: 'bxor',
} as const;

export type ReduceOp = (typeof ReduceOp)[keyof typeof ReduceOp];

export const REDUCE_OPS: readonly ReduceOp[] = Object.values(ReduceOp);

export function isReduceOp(op: unknown): op is ReduceOp {
  return typeof op === 'string' && (REDUCE_OPS as readonly string[]).includes(op);
}

/**
 * Throws InvalidArgumentError unless `op` can reduce `dtype`: bitwise ops need integers (torch:
 * "Cannot use ReduceOp.BAND with non-integral dtype"), AVG needs floats (integer division is not
 * what torch's average means, and Gloo rejects AVG outright).
 */
export function validateReduceOp(op: unknown, dtype: DType): asserts op is ReduceOp {
  if (!isReduceOp(op)) {
    throw new InvalidArgumentError(`unknown reduce op ${JSON.stringify(op)}; expected one of ${REDUCE_OPS.join(', ')}`);
  }
  const float = isFloatDType(dtype);
  if (float && (op === 'band' || op === 'bor' || op === 'bxor')) {
    throw new InvalidArgumentError(`ReduceOp.${op.toUpperCase()} needs an integer dtype, got ${dtype}`);
  }
  if (!float && op === 'avg') {
    throw new InvalidArgumentError(`ReduceOp.AVG needs a floating-point dtype, got ${dtype}`);
  }
}
