import { InvalidArgumentError } from '../errors';
import { bytesOf, dtypeOf, elementSize, viewAs } from './dtype';
import { BFloat16BitsArray, F16_TO_F32, Float16BitsArray, bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from './half';

// Reference f16 rounding done with exact rational arithmetic on doubles (independent of the bit code).
function refF16(v: number): number {
  const f = Math.fround(v);
  if (Number.isNaN(f)) return 0x7e00;
  const sign = f < 0 || Object.is(f, -0) ? 0x8000 : 0;
  const a = Math.abs(f);
  if (a === Infinity) return sign | 0x7c00;
  // candidates: all finite f16 magnitudes; pick nearest, ties to even bits
  let lo = 0;
  let hi = 0x7bff;
  if (a >= 65520) return sign | 0x7c00; // halfway between max (65504) and 2^16 rounds to Inf
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (F16_TO_F32[mid] <= a) lo = mid;
    else hi = mid - 1;
  }
  const below = lo;
  const above = Math.min(lo + 1, 0x7c00);
  const dBelow = a - F16_TO_F32[below];
  const dAbove = (above === 0x7c00 ? 65536 : F16_TO_F32[above]) - a;
  if (dBelow < dAbove) return sign | below;
  if (dAbove < dBelow) return sign | above;
  return sign | (below & 1 ? above : below);
}

describe('float16 conversion', () => {
  it('decodes special values', () => {
    expect(f16BitsToF32(0x0000)).toBe(0);
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true);
    expect(f16BitsToF32(0x3c00)).toBe(1);
    expect(f16BitsToF32(0xc000)).toBe(-2);
    expect(f16BitsToF32(0x7bff)).toBe(65504);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24); // smallest subnormal
    expect(f16BitsToF32(0x03ff)).toBe(1023 * 2 ** -24); // largest subnormal
    expect(f16BitsToF32(0x0400)).toBe(2 ** -14); // smallest normal
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity);
    expect(Number.isNaN(f16BitsToF32(0x7e00))).toBe(true);
    expect(Number.isNaN(f16BitsToF32(0xfc01))).toBe(true);
  });

  it('round-trips every non-NaN bit pattern', () => {
    for (let h = 0; h < 65536; h++) {
      const v = f16BitsToF32(h);
      if (Number.isNaN(v)) {
        expect(Number.isNaN(f16BitsToF32(f32ToF16Bits(v)))).toBe(true);
        continue;
      }
      if (f32ToF16Bits(v) !== h) throw new Error(`round trip of 0x${h.toString(16)} gave 0x${f32ToF16Bits(v).toString(16)}`);
    }
  });

  it('rounds to nearest even, including halfway cases, subnormals and overflow', () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // halfway, even below
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // halfway, even above
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01); // just above halfway
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // halfway to smallest subnormal -> even (0)
    expect(f32ToF16Bits(2 ** -25 * 1.5)).toBe(0x0001);
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002); // halfway 1..2 -> 2
    expect(f32ToF16Bits(2 ** -26)).toBe(0x0000);
    expect(f32ToF16Bits(-(2 ** -26))).toBe(0x8000);
    expect(f32ToF16Bits(65519)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00);
    expect(f32ToF16Bits(1e10)).toBe(0x7c00);
    expect(f32ToF16Bits(-1e10)).toBe(0xfc00);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(NaN) & 0x7c00).toBe(0x7c00);
    expect(f32ToF16Bits(NaN) & 0x3ff).not.toBe(0);
  });

  it('matches an independent reference on many random values', () => {
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    for (let i = 0; i < 20000; i++) {
      const v = (rnd() - 0.5) * 2 ** Math.floor(rnd() * 50 - 30);
      const got = f32ToF16Bits(v);
      const want = refF16(v);
      if (got !== want) throw new Error(`f16(${v}) = 0x${got.toString(16)}, want 0x${want.toString(16)}`);
    }
  });
});

describe('bfloat16 conversion', () => {
  it('converts with round to nearest even and keeps specials', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(bf16BitsToF32(0x3f80)).toBe(1);
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80); // halfway -> even
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82);
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(f32ToBf16Bits(-Infinity)).toBe(0xff80);
    expect(f32ToBf16Bits(-0)).toBe(0x8000);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
    expect(f32ToBf16Bits(3.4028234663852886e38)).toBe(0x7f80); // f32 max rounds up to Inf
    expect(bf16BitsToF32(0x0001)).toBe(2 ** -133); // subnormal
    expect(Object.is(bf16BitsToF32(0x8000), -0)).toBe(true);
  });

  it('round-trips every non-NaN bit pattern', () => {
    for (let b = 0; b < 65536; b++) {
      const v = bf16BitsToF32(b);
      if (Number.isNaN(v)) continue;
      if (f32ToBf16Bits(v) !== b) throw new Error(`bf16 round trip of 0x${b.toString(16)}`);
    }
  });
});

describe('Float16BitsArray / BFloat16BitsArray', () => {
  it('from() converts numbers, toFloat32() decodes, subarray/slice keep the class', () => {
    const h = Float16BitsArray.from([1, 0.5, -2, 65504, 1e6]);
    expect(h).toBeInstanceOf(Float16BitsArray);
    expect(h).toBeInstanceOf(Uint16Array);
    expect(Array.from(h.toFloat32())).toEqual([1, 0.5, -2, 65504, Infinity]);
    expect(h.subarray(1, 3)).toBeInstanceOf(Float16BitsArray);
    expect(h.slice(1, 3)).toBeInstanceOf(Float16BitsArray);
    expect(Array.from(h.subarray(1, 3).toFloat32())).toEqual([0.5, -2]);
    expect(Float16BitsArray.of(3).getFloat(0)).toBe(3);
    const b = BFloat16BitsArray.from(new Set([1, 3.140625]));
    expect(b).toBeInstanceOf(BFloat16BitsArray);
    expect(Array.from(b.toFloat32())).toEqual([1, 3.140625]);
    expect(b.slice(1)).toBeInstanceOf(BFloat16BitsArray);
    expect(Array.from(BFloat16BitsArray.from([1, 2], (x) => x * 10).toFloat32())).toEqual([10, 20]);
  });
});

describe('dtype helpers', () => {
  it('dtypeOf names every supported type', () => {
    expect(dtypeOf(new Float32Array(1))).toBe('float32');
    expect(dtypeOf(new Float64Array(1))).toBe('float64');
    expect(dtypeOf(new Int8Array(1))).toBe('int8');
    expect(dtypeOf(new Uint8Array(1))).toBe('uint8');
    expect(dtypeOf(new Int32Array(1))).toBe('int32');
    expect(dtypeOf(new BigInt64Array(1))).toBe('int64');
    expect(dtypeOf(new Float16BitsArray(1))).toBe('float16');
    expect(dtypeOf(new BFloat16BitsArray(1))).toBe('bfloat16');
    expect(dtypeOf(new Float16BitsArray(4).subarray(1))).toBe('float16');
  });

  it('dtypeOf rejects unsupported arrays with a typed error naming the type', () => {
    for (const bad of [new Uint16Array(1), new Uint32Array(1), new Int16Array(1), new BigUint64Array(1), new Uint8ClampedArray(1), [1, 2], null, 3]) {
      expect(() => dtypeOf(bad)).toThrow(InvalidArgumentError);
    }
    expect(() => dtypeOf(new Uint16Array(1))).toThrow(/Uint16Array.*Float16BitsArray/);
    expect(() => dtypeOf(new Uint32Array(1))).toThrow(/Uint32Array/);
  });

  it('bytesOf is a view and viewAs reinterprets without copying', () => {
    const f = new Float32Array([1, 2, 3, 4]).subarray(1, 3);
    const bytes = bytesOf(f);
    expect(bytes.byteLength).toBe(8);
    expect(bytes.byteOffset).toBe(4);
    const back = viewAs(bytes, 'float32') as Float32Array;
    back[0] = 42;
    expect(f[0]).toBe(42);
    expect(viewAs(bytes, 'float16')).toBeInstanceOf(Float16BitsArray);
    expect(viewAs(bytesOf(new Float64Array(2)), 'int64')).toBeInstanceOf(BigInt64Array);
    expect(() => viewAs(bytes, 'int64')).toThrow(/offset/);
    expect(() => viewAs(new Uint8Array(8).subarray(1, 5), 'float32')).toThrow(InvalidArgumentError);
    expect(() => viewAs(new Uint8Array(6), 'float32')).toThrow(InvalidArgumentError);
    expect(elementSize('bfloat16')).toBe(2);
    expect(() => elementSize('float128' as never)).toThrow(InvalidArgumentError);
  });
});
