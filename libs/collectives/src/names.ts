// The library's vocabulary on its own (`@cmesh/collectives/names`): collective names, dtypes and
// reduce ops, for packages that speak it on the wire (@cmesh/protocol) without loading the
// library itself.
export { COLLECTIVES, Collective, SWEEP_OPS, SweepOp, isCollective, isSweepOp } from './ops/names';
export { DTYPES, DType, isDType, isFloatDType, elementSize } from './tensor/dtype';
export { ReduceOp, REDUCE_OPS, isReduceOp } from './reduce-op';
