// Dtypes of the typed arrays the library accepts, and zero-copy byte views of them.
import { InvalidArgumentError } from '../errors';
import { BFloat16BitsArray, Float16BitsArray } from './half';

/** The dtypes, by the library's names (torch's); their order is also their wire code (ops/signature.ts). */
export const DTYPES = ['float32', 'float64', 'int8', 'uint8', 'int32', 'int64', 'float16', 'bfloat16'] as const;
export type DType = (typeof DTYPES)[number];

export type Tensor = Float32Array | Float64Array | Int8Array | Uint8Array | Int32Array | BigInt64Array | Float16BitsArray | BFloat16BitsArray;

const ELEMENT_SIZE: Record<DType, number> = {
  float32: 4,
  float64: 8,
  int8: 1,
  uint8: 1,
  int32: 4,
  int64: 8,
  float16: 2,
  bfloat16: 2,
};

export function isDType(v: unknown): v is DType {
  return typeof v === 'string' && Object.prototype.hasOwnProperty.call(ELEMENT_SIZE, v);
}

export function elementSize(dtype: DType): number {
  const size = ELEMENT_SIZE[dtype];
  if (size === undefined || !isDType(dtype)) {
    throw new InvalidArgumentError(`unknown dtype ${JSON.stringify(dtype)}; expected one of ${DTYPES.join(', ')}`);
  }
  return size;
}

export function isFloatDType(dtype: DType): boolean {
  return dtype === 'float32' || dtype === 'float64' || dtype === 'float16' || dtype === 'bfloat16';
}

function describe(t: unknown): string {
  if (t === null) return 'null';
  if (typeof t !== 'object') return typeof t;
  return (t as object).constructor?.name ?? 'object';
}

/** The dtype of a tensor; throws InvalidArgumentError naming the type for anything else. */
export function dtypeOf(t: unknown): DType {
  // order matters: the 16-bit float classes extend Uint16Array, which is itself unsupported
  if (t instanceof Float32Array) return 'float32';
  if (t instanceof Float64Array) return 'float64';
  if (t instanceof Float16BitsArray) return 'float16';
  if (t instanceof BFloat16BitsArray) return 'bfloat16';
  if (t instanceof Int8Array) return 'int8';
  if (t instanceof Uint8Array && !(t instanceof Uint8ClampedArray)) return 'uint8';
  if (t instanceof Int32Array) return 'int32';
  if (t instanceof BigInt64Array) return 'int64';
  const hint = t instanceof Uint16Array ? ' (for 16-bit floats use Float16BitsArray or BFloat16BitsArray)' : '';
  throw new InvalidArgumentError(
    `unsupported tensor type ${describe(t)}${hint}; expected Float32Array, Float64Array, Int8Array, Uint8Array, Int32Array, BigInt64Array, Float16BitsArray or BFloat16BitsArray`,
  );
}

export function isTensor(t: unknown): t is Tensor {
  try {
    dtypeOf(t);
    return true;
  } catch {
    return false;
  }
}

/** The tensor's memory as bytes (a view, no copy). */
export function bytesOf(t: Tensor): Uint8Array {
  return new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
}

/** A typed view of `bytes` as `dtype` (no copy). The offset and length must fit the element size. */
export function viewAs(bytes: Uint8Array, dtype: DType): Tensor {
  const size = elementSize(dtype);
  if (bytes.byteOffset % size !== 0 || bytes.byteLength % size !== 0) {
    throw new InvalidArgumentError(
      `cannot view ${bytes.byteLength} bytes at offset ${bytes.byteOffset} as ${dtype}: offset and length must be multiples of ${size}`,
    );
  }
  const n = bytes.byteLength / size;
  const buffer = bytes.buffer as ArrayBuffer;
  const byteOffset = bytes.byteOffset;
  switch (dtype) {
    case 'float32':
      return new Float32Array(buffer, byteOffset, n);
    case 'float64':
      return new Float64Array(buffer, byteOffset, n);
    case 'int8':
      return new Int8Array(buffer, byteOffset, n);
    case 'uint8':
      return new Uint8Array(buffer, byteOffset, n);
    case 'int32':
      return new Int32Array(buffer, byteOffset, n);
    case 'int64':
      return new BigInt64Array(buffer, byteOffset, n);
    case 'float16':
      return new Float16BitsArray(buffer, byteOffset, n);
    case 'bfloat16':
      return new BFloat16BitsArray(buffer, byteOffset, n);
  }
}

/** A new zero-filled tensor of `dtype` with `n` elements. */
export function allocTensor(dtype: DType, n: number): Tensor {
  return viewAs(new Uint8Array(n * elementSize(dtype)), dtype);
}
