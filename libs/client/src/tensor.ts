// The library's dtypes on typed arrays, without loading the library: 16-bit floats are
// Uint16Arrays of raw bits (the library's Float16BitsArray / BFloat16BitsArray are such arrays)
// and need their dtype named unless they are one of those classes.
import { DType } from '@cmesh/collectives/names';
import { InvalidArgumentError } from '@cmesh/collectives/errors';

export type ServiceTensor = Float32Array | Float64Array | Int8Array | Uint8Array | Int32Array | BigInt64Array | Uint16Array;

const BY_CLASS: [new (n: number) => ServiceTensor, DType][] = [
  [Float32Array, 'float32'],
  [Float64Array, 'float64'],
  [Int8Array, 'int8'],
  [Uint8Array, 'uint8'],
  [Int32Array, 'int32'],
  [BigInt64Array, 'int64'],
];

/** The tensor's dtype: `dtype` when given (checked against the array), else from its class. */
export function dtypeOfTensor(t: ServiceTensor, dtype?: DType): DType {
  const name = t?.constructor?.name;
  let found: DType | undefined = BY_CLASS.find(([C]) => t instanceof C && t.constructor === C)?.[1];
  if (name === 'Float16BitsArray') found = 'float16';
  else if (name === 'BFloat16BitsArray') found = 'bfloat16';
  if (!ArrayBuffer.isView(t)) throw new InvalidArgumentError(`expected a typed array, got ${name ?? typeof t}`);
  if (t instanceof Uint16Array && !found) {
    if (dtype !== 'float16' && dtype !== 'bfloat16') throw new InvalidArgumentError(`a Uint16Array holds float16 or bfloat16 bits: name which with { dtype }`);
    return dtype;
  }
  if (!found) throw new InvalidArgumentError(`unsupported tensor class ${name}`);
  if (dtype !== undefined && dtype !== found) throw new InvalidArgumentError(`dtype ${dtype} does not match a ${name} (${found})`);
  return found;
}

/** The tensor's bytes (a view, no copy). */
export function bytesOf(t: ServiceTensor): Uint8Array {
  return new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
}
