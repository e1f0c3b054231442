import { BackendUnsupportedError, InvalidArgumentError } from '../errors';
import { COLLECTIVES } from '../ops/names';
import { REDUCE_OPS } from '../reduce-op';
import { DTYPES } from '../tensor/dtype';
import { checkAlgorithmOption, checkCollective, checkEvenBlocks, checkP2P } from './capabilities';
import { ncclCapabilities, ncclVersionCode } from './nccl/capabilities';
import { chooseDevice } from './nccl/device';
import { NcclUnavailableError } from './nccl/errors';
import { missingFromHello } from './nccl/sidecar';
import type { SidecarHello } from './nccl/protocol';
import { TCP_CAPABILITIES } from './tcp/tcp-backend';

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('no error');
}

describe('backend capabilities', () => {
  it('tcp runs every collective, dtype and reduce op, any-source receives, uneven all-to-all and algorithms', () => {
    for (const op of COLLECTIVES) for (const d of DTYPES) expect(() => checkCollective('tcp', TCP_CAPABILITIES, op, d)).not.toThrow();
    for (const r of REDUCE_OPS) expect(() => checkCollective('tcp', TCP_CAPABILITIES, 'allReduce', 'int32', r)).not.toThrow();
    expect(() => checkP2P('tcp', TCP_CAPABILITIES, 'recv', 'float32', true)).not.toThrow();
    expect(() => checkAlgorithmOption('tcp', TCP_CAPABILITIES, 'allReduce', 'ring')).not.toThrow();
  });

  it('NCCL version codes of both schemes compare', () => {
    expect(ncclVersionCode(2708)).toBe(20708);
    expect(ncclVersionCode(21003)).toBe(21003);
    expect(ncclVersionCode(22703)).toBe(22703);
  });

  it('nccl (2.27): every collective and dtype; no bitwise ops, any-source receive, uneven all-to-all or algorithm option', () => {
    const caps = ncclCapabilities(22703);
    expect([...caps.collectives]).toEqual([...COLLECTIVES]);
    expect([...caps.dtypes]).toEqual([...DTYPES]);
    expect([...caps.reduceOps].sort()).toEqual(['avg', 'max', 'min', 'product', 'sum']);
    const bitwise = thrown(() => checkCollective('nccl', caps, 'reduce', 'int32', 'bxor'));
    expect(bitwise).toBeInstanceOf(BackendUnsupportedError);
    expect(bitwise).toMatchObject({ code: 'BACKEND_UNSUPPORTED', backend: 'nccl', context: { op: 'reduce' } });
    expect(bitwise.message).toBe('reduce: ReduceOp.BXOR (it has sum, product, min, max, avg) is not supported by the nccl backend');
    expect(thrown(() => checkP2P('nccl', caps, 'recv', 'float32', true)).message).toBe(
      'recv: recv from any source (pass src) is not supported by the nccl backend',
    );
    expect(() => checkP2P('nccl', caps, 'recv', 'float32', false)).not.toThrow();
    expect(thrown(() => checkAlgorithmOption('nccl', caps, 'allGather', 'bruck')).message).toMatch(
      /^allGather: the algorithm option \("bruck"; the backend picks its own\)/,
    );
    expect(thrown(() => checkEvenBlocks('nccl', caps, 'allToAll', [2, 2, 3])).message).toBe(
      'allToAll: blocks of different sizes ([2, 2, 3] elements) is not supported by the nccl backend (NCCL exchanges equal blocks here)',
    );
  });

  it('nccl before 2.7 has no point-to-point (gather, scatter, all-to-all, send, recv); before 2.10 no avg or bfloat16', () => {
    const caps = ncclCapabilities(2604);
    expect(caps.p2p).toBe(false);
    expect([...caps.collectives]).toEqual(['allReduce', 'broadcast', 'reduce', 'allGather', 'reduceScatter', 'barrier']);
    expect(thrown(() => checkCollective('nccl', caps, 'gather', 'float32')).message).toBe(
      'gather: gather is not supported by the nccl backend (point-to-point needs NCCL 2.7 or later; the sidecar loaded NCCL 2.6.4)',
    );
    expect(thrown(() => checkP2P('nccl', caps, 'send', 'float32', false))).toBeInstanceOf(BackendUnsupportedError);
    expect(thrown(() => checkCollective('nccl', caps, 'allReduce', 'bfloat16')).message).toMatch(
      /^allReduce: dtype bfloat16 \(it has .*\) is not supported by the nccl backend \(avg and bfloat16 need NCCL 2.10 or later/,
    );
    expect(() => checkCollective('nccl', caps, 'allReduce', 'float32', 'avg')).toThrow(BackendUnsupportedError);
    const v29 = ncclCapabilities(20907);
    expect(v29.p2p).toBe(true);
    expect(v29.reduceOps.has('avg')).toBe(false);
    expect(ncclCapabilities(21003).reduceOps.has('avg')).toBe(true);
  });
});

describe('nccl device choice', () => {
  it('deviceId, else LOCAL_RANK, else 0', () => {
    expect(chooseDevice(2, { LOCAL_RANK: '1' }, 4)).toBe(2);
    expect(chooseDevice(undefined, { LOCAL_RANK: '3' }, 4)).toBe(3);
    expect(chooseDevice(undefined, {}, 1)).toBe(0);
  });

  it('a device CUDA does not see is missing; a malformed index is a bad argument', () => {
    const e = thrown(() => chooseDevice(undefined, { LOCAL_RANK: '2' }, 2)) as NcclUnavailableError;
    expect(e).toBeInstanceOf(NcclUnavailableError);
    expect(e.missing).toEqual(['device']);
    expect(e.message).toBe('nccl backend unavailable (missing: CUDA device): CUDA device 2 (LOCAL_RANK=2) does not exist: CUDA sees 2 devices');
    expect(thrown(() => chooseDevice(undefined, {}, 0)).message).toContain('CUDA device 0 (the default, LOCAL_RANK unset) does not exist: CUDA sees 0 devices');
    expect(thrown(() => chooseDevice(-1, {}, 2))).toBeInstanceOf(InvalidArgumentError);
    expect(thrown(() => chooseDevice(undefined, { LOCAL_RANK: 'x' }, 2)).message).toMatch(/LOCAL_RANK must be a non-negative integer/);
  });
});

describe("what the sidecar's hello says is missing", () => {
  const hello = (cuda: boolean, devices: number, nccl: boolean) =>
    ({ cuda: { available: cuda }, deviceCount: devices, nccl: { available: nccl } }) as unknown as SidecarHello;
  it('names the CUDA runtime, else a device, and the NCCL library', () => {
    expect(missingFromHello(hello(false, 0, false))).toEqual(['cuda-runtime', 'nccl-library']);
    expect(missingFromHello(hello(true, 0, true))).toEqual(['device']);
    expect(missingFromHello(hello(true, 2, false))).toEqual(['nccl-library']);
    expect(missingFromHello(hello(true, 2, true))).toEqual([]);
  });
});
