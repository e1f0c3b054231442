// Messages between `cmesh bench` and its local rank processes (child_process IPC).
import type { BenchSweep } from '@cmesh/protocol';
import type { BenchRankInfo, SizeSamples } from '@cmesh/bench';

/** The sweeps every rank runs in turn in one process group (one nccl-tests table: each type and reduction). */
export type ParentMessage = { type: 'sweeps'; sweeps: BenchSweep[]; backend: string };

export type RankMessage =
  | { type: 'hello'; info: BenchRankInfo }
  | { type: 'size'; rank: number; sweep: number; samples: SizeSamples }
  | { type: 'done'; rank: number }
  | { type: 'error'; rank: number; message: string };
