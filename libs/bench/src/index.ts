// @cmesh/bench: the one nccl-tests-style harness. Per collective a descriptor (collectives/:
// buffer sizes, busbw factor, input data, expected output, the library call), deterministic
// patterns and checks (pattern), size steps (sizes), one rank's timed loop (step, rank-sweep),
// the arithmetic from samples to rows (measure), the table (table) and nccl-tests' spellings
// (nccl-tests-names), and the nccl backend's sweep through the sidecar (nccl). `cmesh bench`, the
// rank agents (tcp and nccl), bench/peers and scripts/gpu-check use it.
export * from './collectives';
export * from './pattern';
export * from './sizes';
export * from './step';
export * from './rank-sweep';
export * from './measure';
export * from './table';
export * from './nccl-tests-names';
export * from './nccl';
export * from './compare-table';
