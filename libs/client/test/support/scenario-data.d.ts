export const SCENARIOS: { sumCount: number; broadcastSrc: number };
export function inputs(rank: number): { sum: number[]; max: number[]; avg: number[]; product: bigint[]; broadcast: number[]; gather: number[] };
export function expected(size: number): { sum: number[]; max: number[]; avg: number[]; product: bigint[]; broadcast: number[]; gather: number[][] };
