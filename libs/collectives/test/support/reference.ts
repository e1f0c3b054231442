// The reference values live in @cmesh/testing (scripts/gpu-check checks against them too).
export { ALL_DTYPES, FLOAT_DTYPES, FLOAT_OPS, INT_DTYPES, INT_OPS, diff, input, inputValue, opsFor, reducedValue, tensorOf, valuesOf } from '@cmesh/testing';
