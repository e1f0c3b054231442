// Python's float formatting, exactly: `{:.Nf}`, `{:.Ne}` (round half to even on the exact
// binary value, as CPython does) and `str(float)`. JS's toFixed/toExponential round ties up,
// and String(x) switches to exponent notation at other thresholds than Python.

/** x (finite, >= 0) as an exact decimal: x === digits / 10^scale. */
function exactDecimal(x: number): { digits: bigint; scale: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biasedExp = (hi >>> 20) & 0x7ff;
  let mantissa = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp: number;
  if (biasedExp === 0) {
    exp = -1074; // subnormal
  } else {
    mantissa |= 1n << 52n;
    exp = biasedExp - 1075;
  }
  if (exp >= 0) return { digits: mantissa << BigInt(exp), scale: 0 };
  // m / 2^k == m * 5^k / 10^k
  return { digits: mantissa * 5n ** BigInt(-exp), scale: -exp };
}

/** digits / 10^drop rounded half to even. */
function roundHalfEven(digits: bigint, drop: number): bigint {
  if (drop <= 0) return digits * 10n ** BigInt(-drop);
  const div = 10n ** BigInt(drop);
  const q = digits / div;
  const r2 = (digits % div) * 2n;
  if (r2 > div || (r2 === div && q % 2n === 1n)) return q + 1n;
  return q;
}

function signOf(x: number): string {
  return x < 0 || Object.is(x, -0) ? '-' : '';
}

function nonFinite(x: number): string | undefined {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  return undefined;
}

/** Python `format(x, '.{precision}f')`. */
export function formatFixed(x: number, precision: number): string {
  const special = nonFinite(x);
  if (special !== undefined) return special;
  const { digits, scale } = exactDecimal(Math.abs(x));
  const n = roundHalfEven(digits, scale - precision)
    .toString()
    .padStart(precision + 1, '0');
  const intPart = n.slice(0, n.length - precision);
  const frac = n.slice(n.length - precision);
  return signOf(x) + intPart + (precision > 0 ? '.' + frac : '');
}

/** Python `format(x, '.{precision}e')`, e.g. 1.0000e-05. */
export function formatExp(x: number, precision: number): string {
  const special = nonFinite(x);
  if (special !== undefined) return special;
  const abs = Math.abs(x);
  let mant: string;
  let e: number;
  if (abs === 0) {
    mant = '0'.repeat(precision + 1);
    e = 0;
  } else {
    const { digits, scale } = exactDecimal(abs);
    const len = digits.toString().length;
    e = len - 1 - scale;
    mant = roundHalfEven(digits, len - (precision + 1)).toString();
    if (mant.length > precision + 1) {
      // rounding carried into a new digit (9.99995 -> 10.0000)
      mant = mant.slice(0, precision + 1);
      e += 1;
    }
  }
  const body = precision > 0 ? `${mant[0]}.${mant.slice(1)}` : mant;
  const expStr = String(Math.abs(e)).padStart(2, '0');
  return `${signOf(x)}${body}e${e < 0 ? '-' : '+'}${expStr}`;
}

/** Python `str(x)` / `repr(x)` for a float: shortest round-trip digits, Python's layout. */
export function pyFloat(x: number): string {
  const special = nonFinite(x);
  if (special !== undefined) return special;
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  // toExponential() with no argument gives the shortest digits that round-trip
  const [m, expPart] = Math.abs(x).toExponential().split('e');
  const e = Number(expPart);
  const digits = m.replace('.', '');
  const sign = signOf(x);
  if (e < -4 || e >= 16) {
    const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${mant}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
  const intLen = e + 1;
  if (digits.length <= intLen) return `${sign}${digits.padEnd(intLen, '0')}.0`;
  return `${sign}${digits.slice(0, intLen)}.${digits.slice(intLen)}`;
}
