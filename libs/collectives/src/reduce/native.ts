// Loads the native reduction addon (native/reduce-addon, built by `make native`) on first use.
// Missing addon or CMESH_NATIVE=0: callers fall back to the TypeScript kernels (js-kernels.ts).
import { existsSync } from 'fs';
import { resolve } from 'path';
import { DType } from '../tensor/dtype';

export interface NativeReduce {
  /** Kernel set picked at load from the CPU's features: "avx2+f16c" or "generic". */
  readonly isa: string;
  /** Every kernel set this CPU can run, best first. */
  readonly isas: readonly string[];
  /** Switches to another kernel set (tests exercise each one); returns its name. */
  selectIsa(name: string): string;
  reduceInto(dst: ArrayBufferView, src: ArrayBufferView, dtypeCode: number, opCode: number): void;
  divide(t: ArrayBufferView, dtypeCode: number, divisor: number): void;
}

/** Where node-gyp puts the addon. */
export const NATIVE_ADDON_PATH = resolve(__dirname, '../../../../native/reduce-addon/build/Release/cmesh_reduce.node');

// Codes shared with native/reduce-addon/src/dtypes.h.
export const DTYPE_CODE: Readonly<Record<DType, number>> = {
  float32: 0,
  float64: 1,
  int8: 2,
  uint8: 3,
  int32: 4,
  int64: 5,
  float16: 6,
  bfloat16: 7,
};

/** AVG reduces as SUM (the division happens once, in finishAvg). */
export const OP_CODE: Readonly<Record<string, number>> = {
  sum: 0,
  avg: 0,
  product: 1,
  min: 2,
  max: 3,
  band: 4,
  bor: 5,
  bxor: 6,
};

let loaded: NativeReduce | null | undefined;
let loadError: Error | undefined;

/** The addon, or null when it is disabled (CMESH_NATIVE=0), not built, or failed to load. */
export function loadNative(): NativeReduce | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.env.CMESH_NATIVE === '0') return loaded;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require(NATIVE_ADDON_PATH) as NativeReduce;
  } catch (e) {
    loadError = e as Error;
  }
  return loaded;
}

/** Why the addon did not load (undefined when it loaded, was disabled or was never tried). */
export function nativeLoadError(): Error | undefined {
  return loadError;
}

/** True when the addon file exists, i.e. `make native` built it and loading is expected to work. */
export function nativeAddonBuilt(): boolean {
  return existsSync(NATIVE_ADDON_PATH);
}
