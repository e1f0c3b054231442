// Golden strings printed by torch 1.13 (Debian python3-torch) for the same tensors.
import * as dist from '@cmesh/collectives';
import { formatExp, formatFixed, pyFloat } from './py-number';
import { itemStr, listRepr, tensorRepr } from './torch-format';

const f32 = (xs: number[]) => Float32Array.from(xs);
const i64 = (xs: number[]) => BigInt64Array.from(xs.map(BigInt));
const range = (n: number, f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));

describe('tensorRepr matches torch', () => {
  const check = (name: string, got: () => string, want: string) => test(name, () => expect(got()).toBe(want));

  check('2x2 integral floats', () => tensorRepr(f32([6, 6, 6, 6]), [2, 2]), 'tensor([[6., 6.],\n        [6., 6.]])');
  check('2x2 mixed signs', () => tensorRepr(f32([3.4373, 1.1562, 0.1356, -1.2088]), [2, 2]), 'tensor([[ 3.4373,  1.1562],\n        [ 0.1356, -1.2088]])');
  check('vector', () => tensorRepr(f32([1, 2, 3, 4, 5])), 'tensor([1., 2., 3., 4., 5.])');
  check('padded ints as floats', () => tensorRepr(f32([27, 216])), 'tensor([ 27., 216.])');
  check('int64', () => tensorRepr(i64([6000])), 'tensor([6000])');
  check('int64 0-dim', () => tensorRepr(i64([2]), []), 'tensor(2)');
  check('float 0-dim', () => tensorRepr(f32([6]), []), 'tensor(6.)');
  check('float 0-dim fraction', () => tensorRepr(f32([0.5]), []), 'tensor(0.5000)');
  check('zeros', () => tensorRepr(f32([0, 0])), 'tensor([0., 0.])');
  check('empty float', () => tensorRepr(f32([])), 'tensor([])');
  check('empty int64', () => tensorRepr(i64([])), 'tensor([], dtype=torch.int64)');
  check('empty 2-d', () => tensorRepr(f32([]), [0, 3]), 'tensor([], size=(0, 3))');
  check('float64', () => tensorRepr(Float64Array.from([1.5, 2])), 'tensor([1.5000, 2.0000], dtype=torch.float64)');
  check('int32', () => tensorRepr(Int32Array.from([1, -20])), 'tensor([  1, -20], dtype=torch.int32)');
  check('uint8', () => tensorRepr(Uint8Array.from([1, 255])), 'tensor([  1, 255], dtype=torch.uint8)');
  check('int8', () => tensorRepr(Int8Array.from([-1, 5])), 'tensor([-1,  5], dtype=torch.int8)');
  check('float16', () => tensorRepr(dist.Float16BitsArray.from([0.1, 2.5])), 'tensor([0.1000, 2.5000], dtype=torch.float16)');
  check('bfloat16', () => tensorRepr(dist.BFloat16BitsArray.from([0.1, 2.5])), 'tensor([0.1001, 2.5000], dtype=torch.bfloat16)');
  check('scientific (small)', () => tensorRepr(f32([1e-5, 1])), 'tensor([1.0000e-05, 1.0000e+00])');
  check('scientific (ratio, integral)', () => tensorRepr(f32([1, 100000])), 'tensor([1.0000e+00, 1.0000e+05])');
  check('scientific (big)', () => tensorRepr(f32([1e9, 2e9])), 'tensor([1.0000e+09, 2.0000e+09])');
  check('nan and inf, integral', () => tensorRepr(f32([NaN, Infinity, -Infinity, 1])), 'tensor([nan, inf, -inf, 1.])');
  check('nan padded', () => tensorRepr(f32([NaN, 1.5])), 'tensor([   nan, 1.5000])');
  check('3-d', () => tensorRepr(f32(range(8, (i) => i)), [2, 2, 2]), 'tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])');
  check(
    'long vector wraps at 80 columns',
    () => tensorRepr(f32(range(40, (i) => i / 3))),
    'tensor([ 0.0000,  0.3333,  0.6667,  1.0000,  1.3333,  1.6667,  2.0000,  2.3333,\n         2.6667,  3.0000,  3.3333,  3.6667,  4.0000,  4.3333,  4.6667,  5.0000,\n         5.3333,  5.6667,  6.0000,  6.3333,  6.6667,  7.0000,  7.3333,  7.6667,\n         8.0000,  8.3333,  8.6667,  9.0000,  9.3333,  9.6667, 10.0000, 10.3333,\n        10.6667, 11.0000, 11.3333, 11.6667, 12.0000, 12.3333, 12.6667, 13.0000])',
  );
  check(
    'summarized 2-d',
    () => tensorRepr(f32(range(2000, (i) => i / 7)), [40, 50]),
    'tensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 6.7143e+00, 6.8571e+00,\n         7.0000e+00],\n        [7.1429e+00, 7.2857e+00, 7.4286e+00,  ..., 1.3857e+01, 1.4000e+01,\n         1.4143e+01],\n        [1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 2.1000e+01, 2.1143e+01,\n         2.1286e+01],\n        ...,\n        [2.6429e+02, 2.6443e+02, 2.6457e+02,  ..., 2.7100e+02, 2.7114e+02,\n         2.7129e+02],\n        [2.7143e+02, 2.7157e+02, 2.7171e+02,  ..., 2.7814e+02, 2.7829e+02,\n         2.7843e+02],\n        [2.7857e+02, 2.7871e+02, 2.7886e+02,  ..., 2.8529e+02, 2.8543e+02,\n         2.8557e+02]])',
  );
  check('summarized 1-d int64', () => tensorRepr(i64(range(1200, (i) => i))), 'tensor([   0,    1,    2,  ..., 1197, 1198, 1199])');
  check('negative zero', () => tensorRepr(f32([-0, 1])), 'tensor([-0., 1.])');
  check('2x3 int64 with negatives', () => tensorRepr(i64([-1, 2, 300, 4, 5, 6]), [2, 3]), 'tensor([[ -1,   2, 300],\n        [  4,   5,   6]])');
  check('column', () => tensorRepr(f32([1, 2]), [2, 1]), 'tensor([[1.],\n        [2.]])');
  check('min < 1e-4 boundary', () => tensorRepr(f32([0.0001, 0.5])), 'tensor([1.0000e-04, 5.0000e-01])');
  check('scientific rounding', () => tensorRepr(f32([0.00005, 0.12345678])), 'tensor([5.0000e-05, 1.2346e-01])');
  check('0-dim scientific', () => tensorRepr(f32([123456789]), []), 'tensor(1.2346e+08)');
  check(
    'dtype suffix wraps',
    () => tensorRepr(Float64Array.from(range(30, (i) => i * 1.5))),
    'tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000],\n       dtype=torch.float64)',
  );

  test('lists and items', () => {
    expect(listRepr([f32([0]), f32([1])])).toBe('[tensor([0.]), tensor([1.])]');
    expect(listRepr(null)).toBe('None');
    expect(itemStr(f32([1]))).toBe('1.0');
    expect(itemStr(f32([1 / 3]))).toBe('0.3333333432674408');
  });

  test('shape mismatch is an error', () => {
    expect(() => tensorRepr(f32([1, 2, 3]), [2, 2])).toThrow(/4 elements but the tensor has 3/);
  });
});

describe('Python number formatting', () => {
  test('ties round half to even like CPython', () => {
    expect(formatFixed(0.03125, 4)).toBe('0.0312'); // JS toFixed gives 0.0313
    expect(formatFixed(0.09375, 4)).toBe('0.0938');
    expect(formatFixed(2.5, 0)).toBe('2');
    expect(formatExp(1.03125, 4)).toBe('1.0312e+00');
    expect(formatExp(9.99995e10, 4)).toBe('1.0000e+11');
    expect(formatFixed(-0.00001, 4)).toBe('-0.0000');
  });
  test('str(float) layout', () => {
    expect(pyFloat(4)).toBe('4.0');
    expect(pyFloat(1e-5)).toBe('1e-05');
    expect(pyFloat(0.0001)).toBe('0.0001');
    expect(pyFloat(1e16)).toBe('1e+16');
    expect(pyFloat(123.456)).toBe('123.456');
    expect(pyFloat(-2.5e-7)).toBe('-2.5e-07');
  });
});
