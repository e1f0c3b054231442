// Elementwise reductions for the collectives: dst = dst op src, and AVG's final division.
//
// Validates once, then runs the native addon (native/reduce-addon: SIMD C++, memory speed) when it
// is built and the array is big enough to amortise the ~0.1 µs call into native code, else the
// TypeScript kernels (js-kernels.ts). Both give the same results element by element.
import { InvalidArgumentError } from '../errors';
import { ReduceOp, validateReduceOp } from '../reduce-op';
import { DType, Tensor, dtypeOf } from '../tensor/dtype';
import { divideJs, reduceIntoJs } from './js-kernels';
import { DTYPE_CODE, NativeReduce, OP_CODE, loadNative } from './native';

/**
 * Smallest array (bytes) handed to native code, per dtype: below it the JS loop finishes before
 * the native call's fixed cost (~0.1 µs, mostly Node-API argument unpacking) pays off. Measured
 * with `bench-kernels.ts --crossover`; JS is slow per element for bytes, int64 and 16-bit floats.
 */
const NATIVE_MIN_BYTES: Readonly<Record<DType, number>> = {
  float32: 1024,
  float64: 1024,
  int8: 64,
  uint8: 64,
  int32: 512,
  int64: 256,
  float16: 64,
  bfloat16: 128,
};

export type KernelMode = 'auto' | 'native' | 'js';

let mode: KernelMode = 'auto';
let native: NativeReduce | null | undefined; // undefined until the first call loads it

function nativeFor(byteLength: number, dtype: DType): NativeReduce | null {
  if (native === undefined) native = mode === 'js' ? null : loadNative();
  if (native === null) return null;
  return mode === 'native' || byteLength >= NATIVE_MIN_BYTES[dtype] ? native : null;
}

/**
 * Chooses the kernels: 'auto' (native above the crossover size, the default), 'native' (native at
 * every size; throws when the addon is not loaded) or 'js' (TypeScript only). For tests and
 * benchmarks. Returns the kernel set now in use, e.g. "avx2+f16c", "generic" or "js".
 */
export function setKernelMode(next: KernelMode): string {
  if (next === 'js') {
    mode = next;
    native = null;
    return 'js';
  }
  const addon = loadNative();
  if (next === 'native' && addon === null) {
    throw new InvalidArgumentError('setKernelMode("native"): the native reduce addon is not loaded (run `make native`, unset CMESH_NATIVE=0)');
  }
  mode = next;
  native = addon;
  return addon?.isa ?? 'js';
}

/**
 * dst[i] = dst[i] op src[i] for every i. Both must have the same dtype and length (any subarray
 * views; they must not partially overlap). AVG accumulates as SUM; call finishAvg afterwards.
 */
export function reduceInto(dst: Tensor, src: Tensor, op: ReduceOp): void {
  const dtype = dtypeOf(dst);
  if (src.constructor !== dst.constructor) {
    throw new InvalidArgumentError(`reduceInto: dtype mismatch, dst is ${dtype} but src is ${src.constructor?.name}`);
  }
  if (src.length !== dst.length) {
    throw new InvalidArgumentError(`reduceInto: length mismatch, dst has ${dst.length} elements but src has ${src.length}`);
  }
  validateReduceOp(op, dtype);
  const addon = nativeFor(dst.byteLength, dtype);
  if (addon !== null) addon.reduceInto(dst, src, DTYPE_CODE[dtype], OP_CODE[op]);
  else reduceIntoJs(dtype, dst, src, op);
}

/** Finishes ReduceOp.AVG in place: divides every element by worldSize (floating dtypes only). */
export function finishAvg(t: Tensor, worldSize: number): void {
  const dtype = dtypeOf(t);
  if (!Number.isInteger(worldSize) || worldSize < 1) {
    throw new InvalidArgumentError(`finishAvg: worldSize must be a positive integer, got ${worldSize}`);
  }
  validateReduceOp('avg', dtype);
  const addon = nativeFor(t.byteLength, dtype);
  if (addon !== null) addon.divide(t, DTYPE_CODE[dtype], worldSize);
  else divideJs(dtype, t, worldSize);
}
