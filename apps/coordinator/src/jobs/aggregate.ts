// Every member's samples of one size -> one nccl-tests row, counted as `cmesh bench` counts
// (@cmesh/bench's rowFromRanks: per iteration the slowest rank, the median over iterations, wrong
// elements summed over ranks).
import { rowFromRanks } from '@cmesh/bench';
import { BenchRow, JobSweep, SizeSamplesMsg } from '@cmesh/protocol';

export function rowFromSamples(sweep: JobSweep, perRank: readonly SizeSamplesMsg[]): BenchRow {
  return rowFromRanks(sweep.backend, sweep, perRank);
}
