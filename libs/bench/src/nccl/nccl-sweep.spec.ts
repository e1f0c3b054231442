import { NcclUnavailableError } from '@cmesh/collectives';
import { ncclBenchRows } from './nccl-rows';
import { NcclSweepRow, NcclSweepSpec, validateNcclSweep } from './nccl-sweep';
import { bufferBytes, runLayout } from './nccl-buffers';

describe('nccl sweep spec validation', () => {
  const base: NcclSweepSpec = {
    store: null as never,
    key: 'jobs/1',
    rank: 0,
    worldSize: 2,
    device: 0,
    cases: [{ collective: 'allReduce', dtype: 'float32' }],
    sizes: [8],
  };
  const one = (c: Partial<NcclSweepSpec['cases'][0]>) => ({ ...base, cases: [{ ...base.cases[0], ...c }] });
  it('accepts a good spec with defaults', () => {
    expect(validateNcclSweep(base, 2)).toMatchObject({
      rank: 0,
      worldSize: 2,
      device: 0,
      warmup: 5,
      iters: 20,
      verify: true,
      modes: ['out-of-place', 'in-place'],
    });
    expect(validateNcclSweep(base, 2).cases).toEqual([{ collective: 'allReduce', dtype: 'float32', redOp: 'sum', root: null }]);
    // The agent's device, never rank % deviceCount (rank 1 of a job on a 2-GPU host's device 0).
    expect(validateNcclSweep({ ...base, rank: 1 }, 2).device).toBe(0);
    expect(validateNcclSweep({ ...base, rank: 0, device: 1 }, 2).device).toBe(1);
    expect(validateNcclSweep(one({ collective: 'broadcast', root: 1 }), 1).cases[0]).toMatchObject({ root: 1, redOp: null });
  });
  it('rejects bad ranks, roots, ops, dtypes, modes and sizes naming the field', () => {
    expect(() => validateNcclSweep({ ...base, rank: 2 }, 1)).toThrow(/rank must be an integer in \[0, 1\]/);
    expect(() => validateNcclSweep(one({ collective: 'reduce', root: 5 }), 1)).toThrow(/root/);
    expect(() => validateNcclSweep(one({ collective: 'barrier' as never }), 1)).toThrow(/unknown collective/);
    expect(() => validateNcclSweep(one({ dtype: 'int32', redOp: 'avg' }), 1)).toThrow(/AVG needs a floating-point dtype/);
    expect(() => validateNcclSweep(one({ dtype: 'int32', redOp: 'band' as never }), 1)).toThrow(/not supported by NCCL/);
    expect(() => validateNcclSweep({ ...base, cases: [] }, 1)).toThrow(/cases/);
    expect(() => validateNcclSweep({ ...base, sizes: [] }, 1)).toThrow(/sizes/);
    expect(() => validateNcclSweep({ ...base, sizes: [1.5] }, 1)).toThrow(/sizes\[0\]/);
    expect(() => validateNcclSweep({ ...base, device: 3 }, 2)).toThrow(/device/);
    expect(() => validateNcclSweep({ ...base, warmup: 0 }, 2)).toThrow(/warmup must be an integer in \[1,/);
    expect(() => validateNcclSweep({ ...base, modes: ['sideways' as never] }, 2)).toThrow(/modes/);
    expect(() => validateNcclSweep(base, 0)).toThrow(NcclUnavailableError);
  });
});

describe('nccl in-place layouts (as nccl-tests lays out its buffers)', () => {
  const b = { send: 11, recv: 22 };
  it('out of place: two buffers; in place: one, with this rank block inside', () => {
    const ag = { bytes: 32, count: 4, sendCount: 4, recvCount: 8 };
    expect(runLayout('send-in-recv', 'out-of-place', b, ag, 4, 1)).toEqual({ sendBuf: 11, sendOffset: 0, recvBuf: 22, recvOffset: 0, resetBytes: 32 });
    expect(runLayout('send-in-recv', 'in-place', b, ag, 4, 1)).toEqual({ sendBuf: 22, sendOffset: 16, recvBuf: 22, recvOffset: 0, resetBytes: 32 });
    const rs = { bytes: 32, count: 4, sendCount: 8, recvCount: 4 };
    expect(runLayout('recv-in-send', 'in-place', b, rs, 4, 1)).toEqual({ sendBuf: 22, sendOffset: 0, recvBuf: 22, recvOffset: 16, resetBytes: 0 });
    expect(bufferBytes(rs, 4)).toEqual({ send: 32, recv: 32 }); // in place, the receive buffer holds the input
    expect(runLayout('same', 'in-place', b, { bytes: 8, count: 2, sendCount: 2, recvCount: 2 }, 4, 0)).toMatchObject({ sendBuf: 22, recvBuf: 22 });
    expect(() => runLayout('none', 'in-place', b, ag, 4, 0)).toThrow(/no in-place form/);
  });
});

describe('nccl rows as the table', () => {
  const row = (mode: NcclSweepRow['mode'], t: number, wrong: number | null): NcclSweepRow => ({
    collective: 'allReduce',
    dtype: 'float32',
    redOp: 'sum',
    root: null,
    mode,
    sizeBytes: 1024,
    count: 256,
    timeSeconds: t,
    hostSeconds: t,
    algbwBytesPerSecond: 1024 / t,
    busbwBytesPerSecond: 1024 / t,
    wrong,
  });
  it('puts both modes on one line, the slowest rank time, wrong summed over ranks', () => {
    const rows = ncclBenchRows(
      [
        [row('out-of-place', 2e-6, 0), row('in-place', 1e-6, 1)],
        [row('out-of-place', 4e-6, 2), row('in-place', 1e-6, null)],
      ],
      20,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ op: 'allReduce', nranks: 2, bytes: 1024, type: 'float32', redop: 'sum', root: -1 });
    expect(rows[0].outOfPlace).toMatchObject({ timeUs: 4, wrong: 2, iters: 20 });
    expect(rows[0].inPlace).toMatchObject({ timeUs: 1, wrong: 1 });
  });
});
