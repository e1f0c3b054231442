// The nccl backend of initProcessGroup in real rank processes, each spawning its own sidecar:
// over the CPU simulation of CUDA and NCCL (native/nccl-sim: what it proves and what only a GPU
// can is in native/nccl-sidecar/README.md), and on this machine as it is, where the typed error
// names what is missing.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { NCCL_SIM_ENV as SIM_ENV, buildSidecar } from '@cmesh/testing';
import { SidecarClient, SidecarProcess, spawnSidecar } from '../src/backends/nccl';
import { RankResult, runRanks } from './support/ranks';

function results(rs: RankResult[]): Record<string, any>[] {
  return rs.map((x) => {
    expect({ rank: x.rank, code: x.code, stderr: x.stderr.slice(-2000) }).toEqual({ rank: x.rank, code: 0, stderr: '' });
    return x.result;
  });
}

beforeAll(() => {
  buildSidecar(); // the sidecar and, with its tests, the simulation
  expect(fs.existsSync(SIM_ENV.CMESH_NCCL_LIB) && fs.existsSync(SIM_ENV.CMESH_CUDART_LIB)).toBe(true);
}, 300_000);

describe.each([1, 2, 4])('initProcessGroup({ backend: "nccl" }) over the simulation, world %i', (world) => {
  it('runs every collective x dtype x reduce op, groups and send/recv, element by element; refuses what NCCL lacks', async () => {
    // each rank's GPU comes from its LOCAL_RANK
    // NCCL_DEBUG=INFO at world 2: NCCL's lines reach each rank's stderr
    const debug: Record<string, string> = world === 2 ? { NCCL_DEBUG: 'INFO' } : {};
    const runs = await runRanks('nccl', world, { timeoutMs: 110_000, env: (rank) => ({ ...SIM_ENV, ...debug, LOCAL_RANK: String(rank) }) });
    if (world === 2) for (const run of runs) expect(run.stderr).toMatch(/ NCCL INFO .*nRanks 2 cudaDev \d - Init COMPLETE/);
    const r = results(
      runs.map((run) => ({
        ...run,
        stderr: run.stderr
          .split('\n')
          .filter((l) => !/ NCCL (INFO|WARN) /.test(l))
          .join('\n'),
      })),
    );
    for (const [rank, o] of r.entries()) {
      expect({ rank, failures: o.failures }).toEqual({ rank, failures: [] });
      expect(o.checks).toBeGreaterThan(300);
      expect(o.backend).toBe('nccl');
      expect(o.sidecars).toBe(1); // the sidecar this process spawned, stopped by destroyProcessGroup
      expect(o.sidecarsAfterDestroy).toBe(0);
      const sum = (world * (world - 1)) / 2;
      expect(o.async).toEqual([
        [sum, sum, sum, sum],
        [world, world],
      ]);
      if (world > 1) {
        expect(o.recvFrom).toBe(rank ^ 1);
        expect(o.p2p).toEqual([rank ^ 1, 1.5, -2]);
      }
      if (world === 4) expect(o.group).toEqual(rank === 2 ? 'non-member' : [[1 * 2 * 4, 1000], 42]);
      expect(o.bitwise).toMatch(
        /^BackendUnsupportedError\(nccl\): allReduce: ReduceOp\.BAND \(it has sum, product, min, max, avg\) is not supported by the nccl backend/,
      );
      expect(o.anySource).toMatch(/^BackendUnsupportedError\(nccl\): recv: recv from any source \(pass src\) is not supported by the nccl backend/);
      expect(o.algorithm).toMatch(/^BackendUnsupportedError\(nccl\): allReduce: the algorithm option \("ring"; the backend picks its own\)/);
      if (world > 1) expect(o.uneven).toMatch(/^BackendUnsupportedError\(nccl\): allToAllSingle: blocks of different sizes/);
      // refused calls took no sequence number: the next all-reduce lines up on every rank
      expect(o.afterErrors).toBe(sum + world);
      // NCCL's bytes do not cross cmesh's data plane: calls counted, bytes 0
      expect(o.traffic.allReduce.calls).toBeGreaterThan(100);
      expect(o.traffic.bytesSent).toBe(0);
      expect(o.traffic.keys.every((k: string) => k.endsWith('/nccl') || k.endsWith('/p2p'))).toBe(true);
      expect(o.events.backends).toEqual(['nccl/nccl']);
      expect(o.events.errors).toBe(0);
    }
  }, 120_000);
});

describe('initProcessGroup({ backend: "nccl" }) attached to running sidecars (CMESH_NCCL_SOCKET)', () => {
  const sidecars: SidecarProcess[] = [];
  let dir: string;
  afterAll(async () => {
    await Promise.all(sidecars.map((s) => s.stop()));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs on them, spawns none, and leaves them running with no communicator or buffer', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-nccl-attach-'));
    const sockets = [0, 1].map((r) => path.join(dir, `rank${r}.sock`));
    for (const socketPath of sockets) sidecars.push(await spawnSidecar({ socketPath, env: { ...process.env, ...SIM_ENV } }));
    const r = results(
      await runRanks('nccl', 2, {
        timeoutMs: 60_000,
        args: { sizes: [1, 7] },
        env: (rank) => ({ CMESH_NCCL_SOCKET: sockets[rank], LOCAL_RANK: String(rank) }),
      }),
    );
    for (const o of r) {
      expect(o.failures).toEqual([]);
      expect(o.checks).toBeGreaterThan(100);
      expect({ spawned: o.sidecars, after: o.sidecarsAfterDestroy }).toEqual({ spawned: 0, after: 0 });
    }
    for (const [i, s] of sidecars.entries()) {
      expect(s.running).toBe(true);
      const client = await SidecarClient.connect(sockets[i]);
      try {
        expect((await client.hello()).resources).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
      } finally {
        client.close();
      }
    }
  }, 70_000);
});

describe('initProcessGroup({ backend: "nccl" }) where NCCL cannot run', () => {
  it('on this machine as it is: NcclUnavailableError naming what is missing, nothing left behind', async () => {
    const [o] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000 }));
    // this machine has neither a usable CUDA runtime nor NCCL; a GPU host with both would get no error
    if (o.error === null) return expect(o.error).toBeNull();
    expect(o.error).toMatchObject({ name: 'NcclUnavailableError', code: 'NCCL_UNAVAILABLE', typed: true });
    expect(o.error.missing.length).toBeGreaterThan(0);
    expect(o.error.message).toMatch(/^nccl backend unavailable \(missing: .+\): /);
    expect({ initialized: o.initialized, sidecars: o.sidecars, tcpAfter: o.tcpAfter }).toEqual({ initialized: false, sidecars: 0, tcpAfter: 'tcp' });
  }, 70_000);

  it('names the NCCL library and the CUDA runtime when neither loads', async () => {
    const env = { CMESH_NCCL_LIB: '/nonexistent/cmesh-test/libnccl.so.2', CMESH_CUDART_LIB: '/nonexistent/cmesh-test/libcudart.so' };
    const [o] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => env }));
    expect(o.error).toMatchObject({ name: 'NcclUnavailableError', typed: true, missing: ['cuda-runtime', 'nccl-library'] });
    expect(o.error.message).toMatch(/^nccl backend unavailable \(missing: CUDA runtime, NCCL library\): /);
    expect(o.error.message).toContain('/nonexistent/cmesh-test/libnccl.so.2');
    expect({ initialized: o.initialized, sidecars: o.sidecars, tcpAfter: o.tcpAfter }).toEqual({ initialized: false, sidecars: 0, tcpAfter: 'tcp' });
  }, 70_000);

  it('names the NCCL library alone when CUDA works but NCCL does not load', async () => {
    const env = { ...SIM_ENV, CMESH_NCCL_LIB: '/nonexistent/cmesh-test/libnccl.so.2' };
    const [o] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => env }));
    expect(o.error).toMatchObject({ name: 'NcclUnavailableError', missing: ['nccl-library'] });
    expect(o.sidecars).toBe(0);
  }, 70_000);

  it('names the device when the GPU asked for (deviceId, or LOCAL_RANK) does not exist', async () => {
    const [a] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => ({ ...SIM_ENV, LOCAL_RANK: '6' }) }));
    expect(a.error).toMatchObject({ name: 'NcclUnavailableError', missing: ['device'] });
    expect(a.error.message).toContain('CUDA device 6 (LOCAL_RANK=6) does not exist: CUDA sees 4 devices');
    expect(a.sidecars).toBe(0);
    const [b] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => SIM_ENV, args: { deviceId: 9 } }));
    expect(b.error.message).toContain('CUDA device 9 (deviceId) does not exist');
  }, 70_000);

  it('names the sidecar binary when there is none, and the sidecar when its socket does not answer', async () => {
    const [a] = results(
      await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => ({ CMESH_NCCL_SIDECAR: '/nonexistent/cmesh-test/cmesh-nccl-sidecar' }) }),
    );
    expect(a.error).toMatchObject({ name: 'NcclUnavailableError', missing: ['sidecar-binary'] });
    expect(a.error.message).toContain('sidecar binary not found at /nonexistent/cmesh-test/cmesh-nccl-sidecar (from CMESH_NCCL_SIDECAR)');
    const socket = path.join(os.tmpdir(), `cmesh-test-no-sidecar-${process.pid}.sock`);
    const [b] = results(await runRanks('nccl-unavailable', 1, { timeoutMs: 60_000, env: () => ({ CMESH_NCCL_SOCKET: socket }) }));
    expect(b.error).toMatchObject({ name: 'NcclUnavailableError', missing: ['sidecar'] });
    expect(b.error.message).toContain(socket);
  }, 70_000);
});

describe('nccl backend faults (world 2, over the simulation)', () => {
  it('a rank that never joins: the other times out naming the group, then fails at once on the aborted communicator', async () => {
    const r = results(
      await runRanks('nccl-faults', 2, { timeoutMs: 60_000, args: { fault: 'timeout' }, env: (rank) => ({ ...SIM_ENV, LOCAL_RANK: String(rank) }) }),
    );
    expect(r[0].warm).toBe(3);
    expect(r[0].first).toMatchObject({ name: 'DistTimeoutError', code: 'TIMEOUT', context: { op: 'allReduce', group: '0', seq: 1, rank: 0, peers: [1] } });
    expect(r[0].first.message).toMatch(/^allReduce timed out after 1500 ms waiting for ranks \[1\]/);
    expect(r[0].firstMs).toBeLessThan(5000);
    expect(r[0].next).toMatchObject({ name: 'NcclError', code: 'NCCL_ERROR', sidecarCode: 'ABORTED' });
    expect(r[0].next.message).toMatch(/^allReduce failed: the communicator was aborted after an earlier failure: allReduce timed out/);
    expect(r[0].nextMs).toBeLessThan(1000);
    expect(r[0].totalMs).toBeLessThan(10_000);
  }, 70_000);

  it("a peer's sidecar dies inside a collective: both ranks get typed errors well within the timeout", async () => {
    const r = results(
      await runRanks('nccl-faults', 2, {
        timeoutMs: 60_000,
        args: { fault: 'peer-dies' },
        env: (rank) => ({ ...SIM_ENV, LOCAL_RANK: String(rank), ...(rank === 1 ? { CMESH_SIM_FAULT: 'die', CMESH_SIM_FAULT_AFTER: '1' } : {}) }),
      }),
    );
    expect(r[1].error).toMatchObject({ name: 'NcclError', code: 'NCCL_ERROR', sidecarCode: 'CONNECTION' });
    expect(r[1].error.message).toMatch(/^allReduce failed: .*sidecar socket .* closed/);
    // the surviving rank hears it from NCCL (asynchronous ncclRemoteError); its communicator is aborted
    expect(r[0].error).toMatchObject({ name: 'NcclError', code: 'NCCL_ERROR', sidecarCode: 'NCCL_ERROR', context: { op: 'allReduce', group: '0', rank: 0 } });
    expect(r[0].error.message).toMatch(/^allReduce failed: .*ncclRemoteError/);
    for (const o of r) expect(o.ms).toBeLessThan(10_000);
  }, 70_000);
});
