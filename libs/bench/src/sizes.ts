// The size steps of a sweep, like nccl-tests' -b, -e and -f (factor) or -i (increment).
export function benchSizes(minBytes: number, maxBytes: number, stepFactor: number, stepBytes = 0): number[] {
  if (!(minBytes > 0) || !(maxBytes >= minBytes)) throw new RangeError(`need 0 < minBytes <= maxBytes, got ${minBytes}..${maxBytes}`);
  if (stepBytes <= 0 && !(stepFactor > 1)) throw new RangeError(`step factor must be > 1, got ${stepFactor}`);
  const sizes: number[] = [];
  for (let s = minBytes; s <= maxBytes; s = stepBytes > 0 ? s + stepBytes : Math.floor(s * stepFactor)) {
    sizes.push(s);
    if (sizes.length > 4096) throw new RangeError('too many size steps (> 4096)');
  }
  return sizes;
}
