import { InvalidArgumentError } from '../errors';
import { ReduceOp, REDUCE_OPS, validateReduceOp } from '../reduce-op';
import { DType, DTYPES, Tensor, allocTensor, isFloatDType } from '../tensor/dtype';
import { Float16BitsArray, bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../tensor/half';
import { finishAvg, reduceInto, setKernelMode } from './kernels';
import { loadNative } from './native';

// Reference semantics, element by element, written independently of the kernels.
function refFloat(op: ReduceOp, a: number, b: number): number {
  switch (op) {
    case 'sum':
    case 'avg':
      return a + b;
    case 'product':
      return a * b;
    case 'min':
      return Number.isNaN(a) || Number.isNaN(b) ? NaN : b < a ? b : a;
    case 'max':
      return Number.isNaN(a) || Number.isNaN(b) ? NaN : b > a ? b : a;
    default:
      throw new Error(op);
  }
}

function refInt(op: ReduceOp, a: bigint, b: bigint, bits: number, signed: boolean): bigint {
  const wrap = (v: bigint) => (signed ? BigInt.asIntN(bits, v) : BigInt.asUintN(bits, v));
  switch (op) {
    case 'sum':
      return wrap(a + b);
    case 'product':
      return wrap(a * b);
    case 'min':
      return a < b ? a : b;
    case 'max':
      return a > b ? a : b;
    case 'band':
      return wrap(a & b);
    case 'bor':
      return wrap(a | b);
    case 'bxor':
      return wrap(a ^ b);
    default:
      throw new Error(op);
  }
}

const INT_INFO: Record<string, { bits: number; signed: boolean; edges: bigint[] }> = {
  int8: { bits: 8, signed: true, edges: [0n, 1n, -1n, 127n, -128n, 100n, -7n, 64n] },
  uint8: { bits: 8, signed: false, edges: [0n, 1n, 255n, 128n, 200n, 7n, 16n, 254n] },
  int32: { bits: 32, signed: true, edges: [0n, 1n, -1n, 2147483647n, -2147483648n, 65536n, -70000n, 123456789n] },
  int64: {
    bits: 64,
    signed: true,
    edges: [0n, 1n, -1n, 9223372036854775807n, -9223372036854775808n, 4294967296n, -3n, 1234567890123n],
  },
};

const FLOAT_EDGES = [0, -0, 1, -1, 0.1, -2.5, NaN, Infinity, -Infinity, 3e38, -3e38, 1e-40, 65504, 1e-7, 0.3333];

function pairs<T>(values: T[]): [T[], T[]] {
  const a: T[] = [];
  const b: T[] = [];
  for (const x of values)
    for (const y of values) {
      a.push(x);
      b.push(y);
    }
  return [a, b];
}

function fill(dtype: DType, values: (number | bigint)[]): Tensor {
  const t = allocTensor(dtype, values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (dtype === 'float16') (t as Uint16Array)[i] = f32ToF16Bits(v as number);
    else if (dtype === 'bfloat16') (t as Uint16Array)[i] = f32ToBf16Bits(v as number);
    else if (dtype === 'int64') (t as BigInt64Array)[i] = BigInt(v);
    else (t as Float64Array)[i] = Number(v);
  }
  return t;
}

function readFloat(dtype: DType, t: Tensor, i: number): number {
  if (dtype === 'float16') return f16BitsToF32((t as Uint16Array)[i]);
  if (dtype === 'bfloat16') return bf16BitsToF32((t as Uint16Array)[i]);
  return (t as Float64Array)[i];
}

// The stored (already rounded) value of x in dtype.
function roundTo(dtype: DType, x: number): number {
  switch (dtype) {
    case 'float32':
      return Math.fround(x);
    case 'float16':
      return f16BitsToF32(f32ToF16Bits(Math.fround(x)));
    case 'bfloat16':
      return bf16BitsToF32(f32ToBf16Bits(Math.fround(x)));
    default:
      return x;
  }
}

function sameFloat(a: number, b: number): boolean {
  return Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
}

describe('validateReduceOp', () => {
  it('accepts valid combinations and rejects the rest with InvalidArgumentError', () => {
    for (const dtype of DTYPES) {
      for (const op of REDUCE_OPS) {
        const bitwise = op === 'band' || op === 'bor' || op === 'bxor';
        const invalid = isFloatDType(dtype) ? bitwise : op === 'avg';
        if (invalid) expect(() => validateReduceOp(op, dtype)).toThrow(InvalidArgumentError);
        else expect(() => validateReduceOp(op, dtype)).not.toThrow();
      }
    }
    expect(() => validateReduceOp('mean', 'float32')).toThrow(/unknown reduce op "mean"/);
    expect(() => validateReduceOp('band', 'float32')).toThrow(/BAND needs an integer dtype, got float32/);
    expect(() => validateReduceOp('avg', 'int32')).toThrow(/AVG needs a floating-point dtype, got int32/);
  });
  it('has torch names', () => {
    expect(ReduceOp).toEqual({ SUM: 'sum', AVG: 'avg', PRODUCT: 'product', MIN: 'min', MAX: 'max', BAND: 'band', BOR: 'bor', BXOR: 'bxor' });
  });
});

// Every case runs on both paths: the TypeScript kernels and the native addon (at every size, so
// the small arrays here really reach native code). native.spec.ts fails when the addon was built
// but does not load, so skipping the native pass here cannot hide a broken build.
// Each kernel set the CPU can run is tested (AVX2+F16C and the portable build).
const addon = loadNative();
const PATHS: string[] = ['js', ...(addon?.isas ?? []).map((isa) => `native ${isa}`)];

describe.each(PATHS)('%s kernels', (path) => {
  beforeAll(() => {
    setKernelMode(path === 'js' ? 'js' : 'native');
    if (path !== 'js') addon!.selectIsa(path.slice('native '.length));
  });
  afterAll(() => {
    if (addon) addon.selectIsa(addon.isa);
    setKernelMode('auto');
  });

  describe('reduceInto: floats', () => {
    for (const dtype of ['float32', 'float64', 'float16', 'bfloat16'] as DType[]) {
      for (const op of ['sum', 'avg', 'product', 'min', 'max'] as ReduceOp[]) {
        it(`${dtype} ${op} on every pair of edge values`, () => {
          const [a, b] = pairs(FLOAT_EDGES);
          const d = fill(dtype, a);
          const s = fill(dtype, b);
          const before = Array.from({ length: a.length }, (_, i) => readFloat(dtype, d, i));
          const sv = Array.from({ length: a.length }, (_, i) => readFloat(dtype, s, i));
          reduceInto(d, s, op);
          for (let i = 0; i < a.length; i++) {
            const want = roundTo(dtype, refFloat(op, before[i], sv[i]));
            const got = readFloat(dtype, d, i);
            if (!sameFloat(got, want)) throw new Error(`${dtype} ${op}(${before[i]}, ${sv[i]}) = ${got}, want ${want}`);
          }
          expect(sv.findIndex((v, i) => !sameFloat(readFloat(dtype, s, i), v))).toBe(-1); // src untouched
        });
      }
    }

    it('-0 + -0 stays -0 and -0 + 0 is +0', () => {
      const d = new Float32Array([-0, -0]);
      reduceInto(d, new Float32Array([-0, 0]), 'sum');
      expect(Object.is(d[0], -0)).toBe(true);
      expect(Object.is(d[1], 0)).toBe(true);
    });

    it('float16 sum rounds to nearest even and overflows to Inf', () => {
      const d = Float16BitsArray.from([2048, 65504, 1]);
      reduceInto(d, Float16BitsArray.from([1, 65504, 2 ** -11]), 'sum'); // 2049 -> 2048 (even), overflow, 1+2^-11 -> 1
      expect(Array.from(d.toFloat32())).toEqual([2048, Infinity, 1]);
    });

    it('handles long arrays across block boundaries and subarray views', () => {
      for (const dtype of ['float16', 'bfloat16', 'float32'] as DType[]) {
        const n = 10000;
        const vals = Array.from({ length: n + 3 }, (_, i) => (i % 97) - 40);
        const d = fill(dtype, vals).subarray(3) as Tensor;
        const s = fill(
          dtype,
          vals.map((v) => v * 2),
        ).subarray(3) as Tensor;
        reduceInto(d, s, 'sum');
        for (let i = 0; i < n; i++) if (readFloat(dtype, d, i) !== vals[i + 3] * 3) throw new Error(`${dtype} at ${i}`);
      }
    });
  });

  describe('reduceInto: integers', () => {
    for (const dtype of ['int8', 'uint8', 'int32', 'int64'] as DType[]) {
      const info = INT_INFO[dtype];
      for (const op of ['sum', 'product', 'min', 'max', 'band', 'bor', 'bxor'] as ReduceOp[]) {
        it(`${dtype} ${op} wraps like fixed-width ints`, () => {
          const [a, b] = pairs(info.edges);
          const d = fill(dtype, a);
          const s = fill(dtype, b);
          reduceInto(d, s, op);
          for (let i = 0; i < a.length; i++) {
            const want = refInt(op, a[i], b[i], info.bits, info.signed);
            const got = BigInt((d as BigInt64Array)[i]);
            if (got !== want) throw new Error(`${dtype} ${op}(${a[i]}, ${b[i]}) = ${got}, want ${want}`);
          }
        });
      }
      it(`${dtype} rejects AVG`, () => {
        expect(() => reduceInto(allocTensor(dtype, 1), allocTensor(dtype, 1), 'avg')).toThrow(InvalidArgumentError);
      });
    }
  });

  describe('reduceInto: bad input', () => {
    it('rejects dtype and length mismatches without touching dst', () => {
      const d = new Float32Array([1, 2]);
      expect(() => reduceInto(d, new Float64Array(2), 'sum')).toThrow(/dtype mismatch/);
      expect(() => reduceInto(d, new Float32Array(3), 'sum')).toThrow(/length mismatch/);
      expect(() => reduceInto(d, new Float32Array(2), 'band')).toThrow(InvalidArgumentError);
      expect(() => reduceInto(d, new Float32Array(2), 'nope' as ReduceOp)).toThrow(InvalidArgumentError);
      expect(Array.from(d)).toEqual([1, 2]);
    });
    it('zero-length arrays are fine', () => {
      reduceInto(new Float32Array(0), new Float32Array(0), 'sum');
    });
  });

  describe('finishAvg', () => {
    it('divides floats by the world size with the dtype rounding', () => {
      const f = new Float32Array([3, 1, -0, NaN, Infinity]);
      finishAvg(f, 3);
      expect(Array.from(f).map((x, i) => sameFloat(x, [1, Math.fround(1 / 3), -0, NaN, Infinity][i]))).toEqual([true, true, true, true, true]);
      const h = fill('float16', [3, 1, 7000]);
      finishAvg(h, 3);
      expect([0, 1, 2].map((i) => readFloat('float16', h, i))).toEqual([1, roundTo('float16', 1 / 3), roundTo('float16', 7000 / 3)]);
      const b = fill('bfloat16', [3, 1]);
      finishAvg(b, 3);
      expect([0, 1].map((i) => readFloat('bfloat16', b, i))).toEqual([1, roundTo('bfloat16', 1 / 3)]);
      const g = new Float64Array([1]);
      finishAvg(g, 4);
      expect(g[0]).toBe(0.25);
    });
    it('rejects integers and bad world sizes', () => {
      expect(() => finishAvg(new Int32Array(1), 2)).toThrow(InvalidArgumentError);
      expect(() => finishAvg(new Float32Array(1), 0)).toThrow(InvalidArgumentError);
    });
  });
});
