import { MAX_SIZE_CLASS, sizeBucket, sizeClass } from './names';

it('sizeClass: the power of two at or above the size, from a fixed list of 37 values', () => {
  expect([0, -1, NaN, 1, 2, 3, 1000, 1024, 1025, 3000, 1 << 20, (1 << 20) + 1].map(sizeClass)).toEqual([
    '0',
    '0',
    '0',
    '1',
    '2',
    '4',
    '1024',
    '1024',
    '2048',
    '4096',
    '1048576',
    '2097152',
  ]);
  expect(sizeClass(MAX_SIZE_CLASS)).toBe('17179869184');
  expect(sizeClass(MAX_SIZE_CLASS + 1)).toBe('+Inf');
  // whatever sizes a sweep uses (nccl-tests -i steps, odd -b/-e), the label takes one of 37 values
  const seen = new Set<string>();
  for (let b = 0; b <= 2 ** 36; b = b < 4096 ? b + 1 : Math.ceil(b * 1.01)) seen.add(sizeClass(b));
  expect(seen.size).toBe(37);
});

it('sizeBucket: powers of four up to 1 GiB, then +Inf', () => {
  expect([0, 1, 4, 5, 1024, 1025, 2 ** 30, 2 ** 30 + 1].map(sizeBucket)).toEqual(['0', '1', '4', '16', '1024', '4096', '1073741824', '+Inf']);
});
