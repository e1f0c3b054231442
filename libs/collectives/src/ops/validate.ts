// Argument checks shared by the collectives. They run before any sequence number is taken or any
// byte is sent, so bad input changes no state.
import { InvalidArgumentError } from '../errors';
import { DType, Tensor, dtypeOf, isTensor } from '../tensor/dtype';

export function tensorArg(t: unknown, what: string, op: string): Tensor {
  if (!isTensor(t)) {
    throw new InvalidArgumentError(`${op}: ${what} must be a tensor (a typed array such as Float32Array), got ${describe(t)}`, { op });
  }
  return t;
}

export function sameDtype(t: Tensor, dtype: DType, what: string, op: string): void {
  const d = dtypeOf(t);
  if (d !== dtype) throw new InvalidArgumentError(`${op}: ${what} has dtype ${d} but the input is ${dtype}`, { op });
}

export function sameLength(t: Tensor, n: number, what: string, op: string): void {
  if (t.length !== n) throw new InvalidArgumentError(`${op}: ${what} has ${t.length} elements, expected ${n}`, { op });
}

/**
 * A list of one tensor per rank of the group, each of `like`'s dtype (and `length` elements when
 * given). A plain loop, with each element's name built only for its error: the list ops run this
 * on every call.
 */
export function tensorList(list: unknown, size: number, what: string, op: string, like: Tensor, length?: number): Tensor[] {
  if (!Array.isArray(list)) throw new InvalidArgumentError(`${op}: ${what} must be an array of ${size} tensors`, { op });
  if (list.length !== size) {
    throw new InvalidArgumentError(`${op}: ${what} must have one tensor per rank of the group (${size}), got ${list.length}`, { op });
  }
  const dtype = dtypeOf(like);
  const out = new Array<Tensor>(size);
  for (let i = 0; i < size; i++) {
    const t: unknown = list[i];
    if (!isTensor(t) || dtypeOf(t) !== dtype || (length !== undefined && t.length !== length)) {
      const name = `${what}[${i}]`;
      const x = tensorArg(t, name, op);
      sameDtype(x, dtype, name, op);
      sameLength(x, length!, name, op);
    }
    out[i] = t as Tensor;
  }
  return out;
}

export function splitSizes(splits: unknown, size: number, total: number, what: string, op: string): number[] {
  if (splits === undefined || (Array.isArray(splits) && splits.length === 0)) {
    if (total % size !== 0) {
      throw new InvalidArgumentError(`${op}: ${what.replace('SplitSizes', '')} length ${total} is not divisible by the group size ${size}; pass ${what}`, {
        op,
      });
    }
    return new Array(size).fill(total / size);
  }
  if (!Array.isArray(splits) || splits.length !== size || !splits.every((s) => Number.isInteger(s) && s >= 0)) {
    throw new InvalidArgumentError(`${op}: ${what} must be ${size} non-negative integers, got ${JSON.stringify(splits)}`, { op });
  }
  const sum = splits.reduce((a: number, b: number) => a + b, 0);
  if (sum !== total) throw new InvalidArgumentError(`${op}: ${what} add up to ${sum} but the tensor has ${total} elements`, { op });
  return splits as number[];
}

export function timeoutArg(ms: unknown, op: string): void {
  if (ms !== undefined && (typeof ms !== 'number' || !(ms > 0))) {
    throw new InvalidArgumentError(`${op}: timeout must be a positive number of milliseconds, got ${String(ms)}`, { op });
  }
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return (v as object).constructor?.name ?? 'object';
  return typeof v;
}
