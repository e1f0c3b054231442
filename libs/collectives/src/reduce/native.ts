// Loads the native reduction addon (native/reduce-addon) on first use, from the first of: the
// file CMESH_REDUCE_ADDON names; the prebuilt copy an installed package carries
// (prebuilds/<platform>-<arch>/); the repository's `make native` output. Missing addon or
// CMESH_NATIVE=0: callers fall back to the TypeScript kernels (js-kernels.ts).
import { existsSync } from 'fs';
import { join, resolve } from 'path';
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

const ADDON = 'cmesh_reduce.node';
/** The package's root: src/reduce or dist/reduce, two levels up. */
const PACKAGE_ROOT = resolve(__dirname, '../..');

/** Where the addon may be, in the order tried. */
function nativeAddonCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  return [
    ...(env.CMESH_REDUCE_ADDON ? [resolve(env.CMESH_REDUCE_ADDON)] : []),
    // a checkout's own build first: a fresh `make native` wins over a copy packed earlier
    resolve(PACKAGE_ROOT, '../../native/reduce-addon/build/Release', ADDON),
    join(PACKAGE_ROOT, 'prebuilds', `${process.platform}-${process.arch}`, ADDON),
  ];
}

/** The addon file that will be loaded, or undefined when none is there. */
function nativeAddonPath(): string | undefined {
  return nativeAddonCandidates().find((p) => existsSync(p));
}

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
  const file = nativeAddonPath();
  if (!file) {
    loadError = new Error(`the reduce addon is not built (looked in ${nativeAddonCandidates().join(', ')}); using the JavaScript kernels`);
    return loaded;
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require(file) as NativeReduce;
  } catch (e) {
    loadError = e as Error;
  }
  return loaded;
}

/** Why the addon did not load (undefined when it loaded, was disabled or was never tried). */
export function nativeLoadError(): Error | undefined {
  return loadError;
}

/** True when an addon file exists, i.e. loading is expected to work. */
export function nativeAddonBuilt(): boolean {
  return nativeAddonPath() !== undefined;
}
