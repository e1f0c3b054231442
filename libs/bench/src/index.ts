// nccl-tests-style sweeps as one rank runs them: deterministic input patterns and their expected
// results (pattern), one prepared op per size and variant (step), and the timed loop (rank-sweep).
export * from './pattern';
export * from './step';
export * from './rank-sweep';
