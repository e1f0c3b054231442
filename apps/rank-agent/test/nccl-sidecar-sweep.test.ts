// The nccl backend above the protocol: sweep sizes and bandwidth factors (nccl-tests'), the
// verification data checked against an independent simulation of each collective, spec
// validation, and NcclBackend on a machine without NCCL (unavailable, with the reason; a sweep
// fails with it; the sidecar is stopped by pid).
import { InvalidArgumentError } from '@cmesh/collectives';
import { DType } from '@cmesh/collectives';

import {
  buildSidecar,
  busBandwidthFactor,
  countWrong,
  expectedOutput,
  fillInput,
  formatSweepTable,
  NcclBackend,
  NcclReduceOp,
  NcclUnavailableError,
  readElement,
  SWEEP_COLLECTIVES,
  SweepCollective,
  sweepPoint,
  validateSweep,
  writeElement,
} from '../src/backends/nccl';

const MISSING_NCCL = '/nonexistent/cmesh-test/libnccl.so.2';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('sweep sizes and bandwidth (nccl-tests conventions)', () => {
  it('maps a size to per-rank counts and buffer sizes', () => {
    // world 4, float32, 1 KiB
    expect(sweepPoint('allReduce', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 256, sendBytes: 1024, recvBytes: 1024 });
    expect(sweepPoint('allGather', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 64, sendBytes: 256, recvBytes: 1024 });
    expect(sweepPoint('reduceScatter', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 64, sendBytes: 1024, recvBytes: 256 });
    expect(sweepPoint('allToAll', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 64, sendBytes: 1024, recvBytes: 1024 });
    expect(sweepPoint('gather', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 64, sendBytes: 256, recvBytes: 1024 });
    expect(sweepPoint('scatter', 1024, 4, 4)).toEqual({ sizeBytes: 1024, count: 64, sendBytes: 1024, recvBytes: 256 });
    expect(sweepPoint('broadcast', 1000, 8, 3)).toEqual({ sizeBytes: 1000, count: 125, sendBytes: 1000, recvBytes: 1000 });
    // rounded down to whole elements per rank
    expect(sweepPoint('allGather', 100, 4, 3)).toEqual({ sizeBytes: 96, count: 8, sendBytes: 32, recvBytes: 96 });
    expect(() => sweepPoint('allReduce', -1, 4, 2)).toThrow(InvalidArgumentError);
  });

  it('uses nccl-tests bus bandwidth factors', () => {
    expect(busBandwidthFactor('allReduce', 8)).toBeCloseTo(1.75, 12);
    expect(busBandwidthFactor('allGather', 8)).toBeCloseTo(0.875, 12);
    expect(busBandwidthFactor('reduceScatter', 4)).toBeCloseTo(0.75, 12);
    expect(busBandwidthFactor('allToAll', 2)).toBeCloseTo(0.5, 12);
    expect(busBandwidthFactor('gather', 4)).toBeCloseTo(0.75, 12);
    expect(busBandwidthFactor('broadcast', 8)).toBe(1);
    expect(busBandwidthFactor('reduce', 8)).toBe(1);
    expect(busBandwidthFactor('sendRecv', 8)).toBe(1);
    expect(busBandwidthFactor('allReduce', 1)).toBe(0);
  });
});

// An independent model of each collective: run it on every rank's input and return rank `me`'s output.
function simulate(coll: SweepCollective, redOp: NcclReduceOp, inputs: number[][], me: number, root: number, c: number): number[] | null {
  const n = inputs.length;
  const red = (vals: number[]) => {
    let acc = vals[0];
    for (const v of vals.slice(1)) {
      if (redOp === 'sum' || redOp === 'avg') acc += v;
      else if (redOp === 'product') acc *= v;
      else if (redOp === 'min') acc = Math.min(acc, v);
      else acc = Math.max(acc, v);
    }
    return redOp === 'avg' ? acc / n : acc;
  };
  const idx = (k: number) => Array.from({ length: k }, (_, i) => i);
  switch (coll) {
    case 'allReduce':
      return idx(c).map((i) => red(inputs.map((x) => x[i])));
    case 'reduce':
      return me === root ? idx(c).map((i) => red(inputs.map((x) => x[i]))) : null;
    case 'reduceScatter':
      return idx(c).map((i) => red(inputs.map((x) => x[me * c + i])));
    case 'broadcast':
      return inputs[root].slice(0, c);
    case 'allGather':
      return inputs.flatMap((x) => x.slice(0, c));
    case 'gather':
      return me === root ? inputs.flatMap((x) => x.slice(0, c)) : null;
    case 'scatter':
      return inputs[root].slice(me * c, me * c + c);
    case 'allToAll':
      return inputs.flatMap((x) => x.slice(me * c, me * c + c));
    case 'sendRecv':
      return inputs[(me - 1 + n) % n].slice(0, c);
  }
}

describe('verification data', () => {
  const cases: Array<[SweepCollective, DType, NcclReduceOp]> = [];
  for (const coll of SWEEP_COLLECTIVES) cases.push([coll, 'float32', 'sum']);
  cases.push(
    ['allReduce', 'float16', 'sum'],
    ['allReduce', 'bfloat16', 'max'],
    ['allReduce', 'int8', 'product'],
    ['allReduce', 'int64', 'min'],
    ['allReduce', 'float64', 'avg'],
    ['reduceScatter', 'uint8', 'sum'],
    ['reduce', 'int32', 'product'],
  );

  it.each(cases)('%s %s %s matches a simulation on every rank of world 3', (coll, dtype, redOp) => {
    const n = 3;
    const root = 1;
    const c = 5;
    const point = sweepPoint(coll, c * n * 8, 8, n); // any size giving count 5 per rank
    const count = coll === 'allGather' || coll === 'reduceScatter' || coll === 'gather' || coll === 'scatter' || coll === 'allToAll' ? point.count : c;
    const sendElems = ['reduceScatter', 'scatter', 'allToAll'].includes(coll) ? count * n : count;
    const inputs = Array.from({ length: n }, (_, r) => {
      const t = fillInput(coll, dtype, redOp, r, sendElems);
      return Array.from({ length: sendElems }, (_, i) => readElement(t, i));
    });
    // every input is exact in its dtype and distinct across ranks somewhere
    expect(new Set(inputs.map((x) => x.join(','))).size).toBe(n);
    for (let me = 0; me < n; me++) {
      const want = simulate(coll, redOp, inputs, me, root, count);
      const got = expectedOutput({ coll, dtype, redOp, rank: me, nranks: n, root, count });
      if (want === null) {
        expect(got).toBeNull();
        continue;
      }
      expect(got).not.toBeNull();
      expect(got!.length).toBe(want.length);
      // the expectation is stored as the dtype, so compare after the same conversion
      const asDtype = fillInput(coll, dtype, redOp, 0, want.length);
      want.forEach((v, i) => writeElement(asDtype, i, v));
      expect(countWrong(got!, asDtype, dtype, redOp)).toBe(0);
    }
  });

  it('counts each wrong element, exactly for integers and with a tolerance for AVG on floats', () => {
    const exp = expectedOutput({ coll: 'allReduce', dtype: 'int32', redOp: 'sum', rank: 0, nranks: 2, root: 0, count: 10 })!;
    const got = exp.slice() as Int32Array;
    expect(countWrong(got, exp, 'int32', 'sum')).toBe(0);
    got[3] += 1;
    got[9] = -1;
    expect(countWrong(got, exp, 'int32', 'sum')).toBe(2);
    const avg = expectedOutput({ coll: 'allReduce', dtype: 'float32', redOp: 'avg', rank: 0, nranks: 3, root: 0, count: 4 })!;
    const near = avg.slice() as Float32Array;
    near[0] *= 1 + 1e-7;
    expect(countWrong(near, avg, 'float32', 'avg')).toBe(0);
    near[1] *= 1.01;
    expect(countWrong(near, avg, 'float32', 'avg')).toBe(1);
  });

  it('formats an nccl-tests style table', () => {
    const table = formatSweepTable(
      [
        {
          collective: 'allReduce',
          dtype: 'float32',
          redOp: 'sum',
          root: null,
          sizeBytes: 1048576,
          count: 262144,
          timeSeconds: 25e-6,
          hostSeconds: 30e-6,
          algbwBytesPerSecond: 1048576 / 25e-6,
          busbwBytesPerSecond: 1048576 / 25e-6,
          wrong: 0,
        },
      ],
      'allReduce world 1',
    );
    const lines = table.split('\n');
    expect(lines[0]).toBe('# allReduce world 1');
    expect(lines[1]).toMatch(/size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong/);
    expect(lines[3].trim().split(/\s+/)).toEqual(['1048576', '262144', 'float32', 'sum', '-1', '25.00', '41.94', '41.94', '0']);
  });
});

describe('sweep spec validation', () => {
  const base = { store: null as never, key: 'jobs/1', rank: 0, worldSize: 2, collective: 'allReduce' as const, dtype: 'float32' as const, sizes: [8] };
  it('accepts a good spec with defaults', () => {
    expect(validateSweep(base, 2)).toMatchObject({ rank: 0, worldSize: 2, device: 0, redOp: 'sum', root: null, warmup: 5, iters: 20, verify: true });
    expect(validateSweep({ ...base, rank: 1 }, 1).device).toBe(0);
    expect(validateSweep({ ...base, collective: 'broadcast', root: 1 }, 1)).toMatchObject({ root: 1, redOp: null });
  });
  it('rejects bad ranks, roots, ops, dtypes and sizes naming the field', () => {
    expect(() => validateSweep({ ...base, rank: 2 }, 1)).toThrow(/rank must be an integer in \[0, 1\]/);
    expect(() => validateSweep({ ...base, collective: 'reduce', root: 5 }, 1)).toThrow(/root/);
    expect(() => validateSweep({ ...base, collective: 'barrier' as never }, 1)).toThrow(/unknown collective/);
    expect(() => validateSweep({ ...base, dtype: 'int32', redOp: 'avg' }, 1)).toThrow(/AVG needs a floating-point dtype/);
    expect(() => validateSweep({ ...base, dtype: 'int32', redOp: 'band' as never }, 1)).toThrow(/not supported by NCCL/);
    expect(() => validateSweep({ ...base, sizes: [] }, 1)).toThrow(/sizes/);
    expect(() => validateSweep({ ...base, sizes: [1.5] }, 1)).toThrow(/sizes\[0\]/);
    expect(() => validateSweep({ ...base, device: 3 }, 2)).toThrow(/device/);
    expect(() => validateSweep(base, 0)).toThrow(NcclUnavailableError);
  });
});

describe('NcclBackend without NCCL', () => {
  let binary: string;
  beforeAll(() => {
    binary = buildSidecar();
  }, 300_000);

  it('starts its sidecar, reports unavailable with the reason, fails a sweep with it, and stops the sidecar by pid', async () => {
    const backend = new NcclBackend({ binary, ncclLib: MISSING_NCCL });
    try {
      expect(backend.available()).toEqual({ ok: false, reason: 'nccl backend not started' });
      const a = await backend.start();
      expect(a.ok).toBe(false);
      expect(a.reason).toContain('NCCL unavailable');
      expect(a.reason).toContain(MISSING_NCCL);
      expect(backend.available()).toEqual(a);
      expect(backend.hello!.nccl.available).toBe(false);
      const pid = backend.sidecarPid!;
      expect(isAlive(pid)).toBe(true);
      const err = await backend
        .runSweep({ store: null as never, key: 'jobs/x', rank: 0, worldSize: 1, collective: 'allReduce', dtype: 'float32', sizes: [8] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(NcclUnavailableError);
      expect(err.reason).toContain(MISSING_NCCL);
      await backend.stop();
      expect(isAlive(pid)).toBe(false);
    } finally {
      await backend.stop();
    }
  });

  it('reports a sidecar that cannot start as unavailable, with why', async () => {
    const backend = new NcclBackend({ binary: '/nonexistent/cmesh-nccl-sidecar' });
    const a = await backend.start();
    expect(a.ok).toBe(false);
    expect(a.reason).toContain('nccl sidecar failed to start');
    expect(a.reason).toContain('/nonexistent/cmesh-nccl-sidecar');
    await backend.stop();
  });
});
