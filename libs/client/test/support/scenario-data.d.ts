export const SCENARIOS: { sumCount: number; broadcastSrc: number; reduceDst: number; gatherDst: number };
interface Inputs {
  sum: number[];
  max: number[];
  avg: number[];
  product: bigint[];
  int8min: number[];
  uint8bor: number[];
  f16sum: number[];
  bf16sum: number[];
  broadcast: number[];
  reduce: number[];
  gather: number[];
  gatherTo: number[];
  scatter: number[][];
  reduceScatter: number[][];
  allToAll: number[][];
}
export function inputs(rank: number, size: number): Inputs;
export function expected(
  size: number,
  rank: number,
): Omit<Inputs, 'gather' | 'gatherTo' | 'scatter' | 'reduceScatter' | 'allToAll'> & {
  gather: number[][];
  gatherTo: number[][];
  scatter: number[];
  reduceScatter: number[];
  allToAll: number[][];
};
export function checkedBy(rank: number, size: number): number;
