// @cmesh/bench/rows: from samples to the table's rows (sizes, busbw factors, rowFromRanks) for the
// coordinator, which aggregates the agents' samples and runs no collective itself.
export { benchSizes } from './sizes';
export { isReduction } from './collectives';
export { rowFromRanks } from './measure';
