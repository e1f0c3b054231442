/** Start of each block (and the total at the end) for blocks of `counts` elements laid out in order. */
export function offsetsOf(counts: readonly number[]): number[] {
  const off = new Array<number>(counts.length + 1);
  off[0] = 0;
  for (let i = 0; i < counts.length; i++) off[i + 1] = off[i] + counts[i];
  return off;
}
