// Messages between `cmesh bench` and its local rank processes (child_process IPC).
import type { BenchSweep } from '@cmesh/protocol';
import type { BenchRankInfo, SizeSamples } from '@cmesh/bench';

export type ParentMessage = { type: 'sweep'; sweep: BenchSweep; backend: string };

export type RankMessage =
  | { type: 'hello'; info: BenchRankInfo }
  | { type: 'size'; rank: number; samples: SizeSamples }
  | { type: 'done'; rank: number }
  | { type: 'error'; rank: number; message: string };
