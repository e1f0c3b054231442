// The native addon against the TypeScript kernels, element by element, for every dtype x op, on
// random bit patterns (NaNs, infinities, subnormals, wrap-around) as well as ordinary values.
import { ReduceOp } from '../reduce-op';
import { DType, Tensor, allocTensor, bytesOf } from '../tensor/dtype';
import { divideJs, reduceIntoJs } from './js-kernels';
import { finishAvg, reduceInto, setKernelMode } from './kernels';
import { DTYPE_CODE, OP_CODE, loadNative, nativeAddonBuilt, nativeLoadError } from './native';

const FLOAT_OPS: ReduceOp[] = ['sum', 'avg', 'product', 'min', 'max'];
const INT_OPS: ReduceOp[] = ['sum', 'product', 'min', 'max', 'band', 'bor', 'bxor'];
const DTYPES: DType[] = ['float32', 'float64', 'int8', 'uint8', 'int32', 'int64', 'float16', 'bfloat16'];
const isFloat = (d: DType) => d === 'float32' || d === 'float64' || d === 'float16' || d === 'bfloat16';

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// Inputs and the TypeScript side of each comparison, made once and checked against every kernel set.
const made = new Map<string, unknown>();
function once<T>(key: string, make: () => T): T {
  if (!made.has(key)) made.set(key, make());
  return made.get(key) as T;
}

// Half random bit patterns, half small ordinary values, so both edge cases and plain arithmetic
// (sums that round, products that wrap) are covered.
function randomTensor(dtype: DType, n: number, seed: number): Tensor {
  return once(`random ${dtype} ${n} ${seed}`, () => makeRandomTensor(dtype, n, seed)).slice() as Tensor;
}

function makeRandomTensor(dtype: DType, n: number, seed: number): Tensor {
  const t = allocTensor(dtype, n);
  const next = rng(seed);
  const bytes = bytesOf(t);
  for (let i = 0; i < bytes.length; i++) bytes[i] = next() & 0xff;
  for (let i = 0; i < n; i += 2) {
    const v = (next() % 2001) / 8 - 125;
    if (dtype === 'int64') (t as BigInt64Array)[i] = BigInt(Math.trunc(v));
    else if (dtype === 'float16' || dtype === 'bfloat16') (t as Uint16Array)[i] = dtype === 'float16' ? 0x3c00 + (next() % 0x800) : 0x3f80 + (next() % 0x200);
    else (t as Float64Array)[i] = isFloat(dtype) ? v : Math.trunc(v);
  }
  return t;
}

const isNaN16 = (dtype: DType, b: number) => (dtype === 'float16' ? (b & 0x7c00) === 0x7c00 && (b & 0x3ff) !== 0 : (b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0);

/** Index of the first element where a and b differ (NaN equals any NaN; -0 differs from +0), or -1. */
function firstDifference(dtype: DType, a: Tensor, b: Tensor): number {
  if (dtype === 'float16' || dtype === 'bfloat16') return firstDifference16(dtype, a as Uint16Array, b as Uint16Array);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === y && (typeof x !== 'number' || x !== 0 || Object.is(x, y))) continue;
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    return i;
  }
  return -1;
}

// the same on bit patterns, in a loop of its own: 16-bit arrays of a million elements compared
// in a loop that also sees the other element types run several times slower
function firstDifference16(dtype: DType, a: Uint16Array, b: Uint16Array): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (isNaN16(dtype, x) && isNaN16(dtype, y)) continue;
    return i;
  }
  return -1;
}

const addon = loadNative();

describe('native reduce addon', () => {
  it('loads whenever it was built (make native), unless CMESH_NATIVE=0', () => {
    if (!nativeAddonBuilt() || process.env.CMESH_NATIVE === '0') {
      console.warn('native reduce addon not built or disabled: only the TypeScript kernels were tested');
      return;
    }
    if (addon === null) throw new Error(`the addon is built but did not load: ${nativeLoadError()?.message}`);
    expect(['avx2+f16c', 'generic']).toContain(addon.isa);
    expect(setKernelMode('native')).toBe(addon.isa);
    setKernelMode('auto');
  });

  const run = addon ? describe : describe.skip;

  // every kernel set the CPU can run (AVX2+F16C and the portable one), not only the fastest
  run.each(addon?.isas ?? ['none'])('%s kernels equal the TypeScript kernels element by element', (isa) => {
    beforeAll(() => addon!.selectIsa(isa));
    afterAll(() => {
      addon!.selectIsa(addon!.isa);
      setKernelMode('auto');
    });
    for (const dtype of DTYPES) {
      for (const op of isFloat(dtype) ? FLOAT_OPS : INT_OPS) {
        it(`${dtype} ${op}`, () => {
          // odd lengths and offsets: vector bodies, scalar tails and unaligned starts
          for (const [n, off, seed] of [
            [1, 0, 1],
            [7, 1, 2],
            [33, 3, 3],
            [4099, 5, 4],
          ]) {
            const { d0, s, js } = once(`${dtype} ${op} ${n}`, () => {
              const d0 = randomTensor(dtype, n + off, seed).subarray(off) as Tensor;
              const js = d0.slice() as Tensor;
              const s = randomTensor(dtype, n + off, seed + 100).subarray(off) as Tensor;
              reduceIntoJs(dtype, js, s, op);
              return { d0, s, js };
            });
            const nat = d0.slice() as Tensor;
            const sBefore = s.slice();
            addon!.reduceInto(nat, s, DTYPE_CODE[dtype], OP_CODE[op]);
            const i = firstDifference(dtype, js, nat);
            if (i >= 0) throw new Error(`${dtype} ${op} n=${n} at ${i}: ${op}(${d0[i]}, ${s[i]}) js=${js[i]} native=${nat[i]}`);
            expect(firstDifference(dtype, s, sBefore as Tensor)).toBe(-1); // src untouched
          }
        });
      }
    }

    for (const dtype of ['float16', 'bfloat16'] as DType[]) {
      it(`${dtype}: every bit pattern against 16 others, every op`, () => {
        const { d0, s, jsByOp } = once(`${dtype} every bit pattern`, () => {
          const n = 65536 * 16;
          const d0 = allocTensor(dtype, n) as Uint16Array;
          const s = allocTensor(dtype, n) as Uint16Array;
          const next = rng(7);
          const others = Array.from({ length: 16 }, () => next() & 0xffff);
          for (let i = 0; i < n; i++) {
            d0[i] = i & 0xffff;
            s[i] = others[i >>> 16];
          }
          const jsByOp = new Map<ReduceOp, Tensor>();
          for (const op of FLOAT_OPS) {
            const js = d0.slice() as Tensor;
            reduceIntoJs(dtype, js, s as Tensor, op);
            jsByOp.set(op, js);
          }
          return { d0, s, jsByOp };
        });
        for (const op of FLOAT_OPS) {
          const js = jsByOp.get(op)!;
          const nat = d0.slice() as Tensor;
          addon!.reduceInto(nat, s, DTYPE_CODE[dtype], OP_CODE[op]);
          const i = firstDifference(dtype, js, nat);
          if (i >= 0)
            throw new Error(`${dtype} ${op}(0x${d0[i].toString(16)}, 0x${s[i].toString(16)}) js=0x${js[i].toString(16)} native=0x${nat[i].toString(16)}`);
        }
      });
    }

    for (const dtype of ['float32', 'float64', 'float16', 'bfloat16'] as DType[]) {
      it(`${dtype} finishAvg divides like the TypeScript kernels`, () => {
        // 2^24 + 1 is not exact in float32: the native code must divide in double then
        for (const w of [1, 2, 3, 7, 1000, 2 ** 24 + 1]) {
          const t0 = randomTensor(dtype, 1029, w);
          const js = t0.slice() as Tensor;
          const nat = t0.slice() as Tensor;
          divideJs(dtype, js, w);
          addon!.divide(nat, DTYPE_CODE[dtype], w);
          const i = firstDifference(dtype, js, nat);
          if (i >= 0) throw new Error(`${dtype} ${t0[i]} / ${w}: js=${js[i]} native=${nat[i]}`);
        }
      });
    }

    it('reduces an array into itself (dst === src)', () => {
      setKernelMode('native');
      const f = Float32Array.from({ length: 37 }, (_, i) => i - 3);
      reduceInto(f, f, 'sum');
      expect(Array.from(f)).toEqual(Array.from({ length: 37 }, (_, i) => 2 * (i - 3)));
      const b = BigInt64Array.from([3n, -5n]);
      reduceInto(b, b, 'product');
      expect(Array.from(b)).toEqual([9n, 25n]);
    });

    it('auto mode gives the same results on both sides of the size crossover', () => {
      setKernelMode('auto');
      for (const n of [0, 1, 63, 64, 127, 128, 129, 1000]) {
        const d = Float32Array.from({ length: n }, (_, i) => i);
        reduceInto(
          d,
          Float32Array.from({ length: n }, () => 0.5),
          'sum',
        );
        finishAvg(d, 2);
        for (let i = 0; i < n; i++) if (d[i] !== (i + 0.5) / 2) throw new Error(`n=${n} at ${i}: ${d[i]}`);
      }
    });

    it('the addon refuses mismatched arrays and codes without touching memory', () => {
      const d = new Float32Array([1, 2]);
      // the element type is native.ts's job; the addon checks what keeps memory safe
      expect(() => addon!.reduceInto(d, new Uint8Array(7), DTYPE_CODE.float32, OP_CODE.sum)).toThrow(/whole, aligned elements/);
      expect(() => addon!.reduceInto(d, new Uint8Array(9).subarray(1), DTYPE_CODE.float32, OP_CODE.sum)).toThrow(/whole, aligned elements/);
      expect(() => addon!.reduceInto(d, new Float32Array(3), DTYPE_CODE.float32, OP_CODE.sum)).toThrow(/lengths differ/);
      expect(() => addon!.reduceInto(d, new Float32Array(2), DTYPE_CODE.float32, OP_CODE.band)).toThrow(/not defined/);
      expect(() => addon!.reduceInto(d, new Float32Array(2), 99, 0)).toThrow(/dtype code/);
      expect(() => addon!.reduceInto({} as Float32Array, d, DTYPE_CODE.float32, 0)).toThrow(/typed array/);
      expect(() => addon!.divide(new Int32Array(2), DTYPE_CODE.int32, 2)).toThrow(/floating/);
      expect(() => addon!.selectIsa('avx512-imaginary')).toThrow(/cannot run/);
      expect(Array.from(d)).toEqual([1, 2]);
    });
  });
});
