import { DTYPES } from '@cmesh/collectives';
import { BENCH_OPS, BENCH_REDOPS } from '@cmesh/protocol';
import {
  NCCL_TESTS_OPS,
  NCCL_TESTS_REDOPS,
  NCCL_TESTS_TYPES,
  dtypeFromNcclTests,
  ncclTestsOp,
  ncclTestsRedop,
  ncclTestsType,
  opFromNcclTests,
  redopFromNcclTests,
} from './nccl-tests-names';

it('spells every op, dtype and redop as nccl-tests does, and reads both spellings back', () => {
  expect(BENCH_OPS.map(ncclTestsOp)).toEqual([
    'all_reduce',
    'broadcast',
    'reduce',
    'all_gather',
    'reduce_scatter',
    'all_to_all',
    'gather',
    'scatter',
    'sendrecv',
  ]);
  expect(DTYPES.map(ncclTestsType)).toEqual(['float', 'double', 'int8', 'uint8', 'int32', 'int64', 'half', 'bfloat16']);
  expect(BENCH_REDOPS.map(ncclTestsRedop)).toEqual(['sum', 'avg', 'prod', 'min', 'max']);
  expect(ncclTestsRedop('none')).toBe('none');
  for (const op of BENCH_OPS) expect([opFromNcclTests(ncclTestsOp(op)), opFromNcclTests(op)]).toEqual([op, op]);
  for (const d of DTYPES) expect([dtypeFromNcclTests(ncclTestsType(d)), dtypeFromNcclTests(d)]).toEqual([d, d]);
  for (const r of BENCH_REDOPS) expect([redopFromNcclTests(ncclTestsRedop(r)), redopFromNcclTests(r)]).toEqual([r, r]);
  // the lists printed in error messages, in nccl-tests' order
  expect(NCCL_TESTS_OPS).toHaveLength(BENCH_OPS.length);
  expect(NCCL_TESTS_TYPES).toHaveLength(DTYPES.length);
  expect(NCCL_TESTS_REDOPS).toEqual(['sum', 'prod', 'min', 'max', 'avg']);
});

it('knows nothing else, not even names of Object.prototype', () => {
  for (const name of ['allreduce', 'fp8', 'band', 'toString', 'constructor', '__proto__', '']) {
    expect([opFromNcclTests(name), dtypeFromNcclTests(name), redopFromNcclTests(name)]).toEqual([undefined, undefined, undefined]);
  }
});
