// 16-bit float formats stored as raw bits in Uint16Array subclasses, plus exact conversions.
// Rounding follows torch: a JS number is first rounded to float32, then float32 -> 16 bits with
// round-to-nearest-even (c10::Half / c10::BFloat16 are constructed from float).

// Shared 4-byte scratch for float32 <-> bits (module-level: no allocation per conversion).
const f32Box = new Float32Array(1);
const u32Box = new Uint32Array(f32Box.buffer);

/** float32 bit pattern -> IEEE binary16 bits, round to nearest even; NaN stays NaN (quiet). */
export function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> Inf
  if (e <= 0) {
    // result is subnormal (or zero): value = mant24 * 2^(e-38) = half * 2^-24
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // a carry out of the mantissa correctly bumps the exponent (up to Inf)
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++;
  return sign | h;
}

/** float32 bit pattern -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet). */
export function f32BitsToBf16Bits(x: number): number {
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

function f16BitsToF32Slow(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24; // zero and subnormals (keeps -0)
  if (exp === 0x1f) return mant !== 0 ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Decode table for binary16: every bit pattern's float32 value, built once (256 KiB). */
export const F16_TO_F32: Float32Array = (() => {
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) table[h] = f16BitsToF32Slow(h);
  return table;
})();

export function f16BitsToF32(h: number): number {
  return F16_TO_F32[h & 0xffff];
}

export function bf16BitsToF32(b: number): number {
  u32Box[0] = (b & 0xffff) << 16;
  return f32Box[0];
}

export function f32ToF16Bits(v: number): number {
  f32Box[0] = v;
  return f32BitsToF16Bits(u32Box[0]);
}

export function f32ToBf16Bits(v: number): number {
  f32Box[0] = v;
  return f32BitsToBf16Bits(u32Box[0]);
}

// Bulk conversions behind toFloat32 (tight loops, caller-owned buffers).

function decodeF16(src: Uint16Array, dst: Float32Array, n: number = src.length): void {
  const table = F16_TO_F32;
  for (let i = 0; i < n; i++) dst[i] = table[src[i]];
}

/** `dstBits` must be a Uint32Array view of the float32 array that receives the values. */
function decodeBf16(src: Uint16Array, dstBits: Uint32Array, n: number = src.length): void {
  for (let i = 0; i < n; i++) dstBits[i] = src[i] << 16;
}

type NumberSource = ArrayLike<number> | Iterable<number>;

function toNumbers(values: NumberSource, mapfn?: (v: number, k: number) => number, thisArg?: unknown): ArrayLike<number> {
  const arr: ArrayLike<number> =
    typeof (values as Iterable<number>)[Symbol.iterator] === 'function' ? Array.from(values as Iterable<number>) : (values as ArrayLike<number>);
  if (!mapfn) return arr;
  const out = new Array<number>(arr.length);
  for (let i = 0; i < arr.length; i++) out[i] = mapfn.call(thisArg, arr[i], i);
  return out;
}

/**
 * IEEE binary16 tensor. Elements are raw bits (it is a Uint16Array); use `from`/`of` to convert
 * numbers and `toFloat32()` to read values. subarray/slice return Float16BitsArray (species).
 * Not the `Float16Array` built into Node 24, whose elements are numbers: the name says bits.
 */
export class Float16BitsArray extends Uint16Array {
  static override from(values: NumberSource, mapfn?: (v: number, k: number) => number, thisArg?: unknown): Float16BitsArray {
    const nums = toNumbers(values, mapfn, thisArg);
    const out = new Float16BitsArray(nums.length);
    for (let i = 0; i < nums.length; i++) out[i] = f32ToF16Bits(Number(nums[i]));
    return out;
  }

  static override of(...values: number[]): Float16BitsArray {
    return Float16BitsArray.from(values);
  }

  // Species already makes these return Float16BitsArray; the overrides only give them the right type.
  override subarray(begin?: number, end?: number): Float16BitsArray {
    return super.subarray(begin, end) as Float16BitsArray;
  }

  override slice(start?: number, end?: number): Float16BitsArray {
    return super.slice(start, end) as Float16BitsArray;
  }

  toFloat32(): Float32Array {
    const out = new Float32Array(this.length);
    decodeF16(this, out);
    return out;
  }

  /** Value of element i as a number. */
  getFloat(i: number): number {
    return F16_TO_F32[this[i]];
  }

  /** Stores a number at element i (rounded to nearest even). */
  setFloat(i: number, v: number): void {
    this[i] = f32ToF16Bits(v);
  }
}

/** bfloat16 tensor (raw bits in a Uint16Array), the counterpart of Float16BitsArray. */
export class BFloat16BitsArray extends Uint16Array {
  static override from(values: NumberSource, mapfn?: (v: number, k: number) => number, thisArg?: unknown): BFloat16BitsArray {
    const nums = toNumbers(values, mapfn, thisArg);
    const out = new BFloat16BitsArray(nums.length);
    for (let i = 0; i < nums.length; i++) out[i] = f32ToBf16Bits(Number(nums[i]));
    return out;
  }

  static override of(...values: number[]): BFloat16BitsArray {
    return BFloat16BitsArray.from(values);
  }

  // Species already makes these return BFloat16BitsArray; the overrides only give them the right type.
  override subarray(begin?: number, end?: number): BFloat16BitsArray {
    return super.subarray(begin, end) as BFloat16BitsArray;
  }

  override slice(start?: number, end?: number): BFloat16BitsArray {
    return super.slice(start, end) as BFloat16BitsArray;
  }

  toFloat32(): Float32Array {
    const out = new Float32Array(this.length);
    decodeBf16(this, new Uint32Array(out.buffer));
    return out;
  }

  getFloat(i: number): number {
    return bf16BitsToF32(this[i]);
  }

  setFloat(i: number, v: number): void {
    this[i] = f32ToBf16Bits(v);
  }
}
