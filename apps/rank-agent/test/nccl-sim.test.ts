// The nccl backend end to end over the CPU simulation of CUDA and NCCL (native/nccl-sim): real
// sidecar processes, one per rank, joined by the simulated NCCL; @cmesh/bench's nccl sweep (the
// agents' nccl path) runs every collective, dtype and reduce op on one communicator, out of place
// and in place, and checks every element. What this proves and what only a GPU can:
// native/nccl-sidecar/README.md, "The CPU simulation".
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { buildSidecar, CUDART_SIM_LIB, NCCL_SIM_ENV, NCCL_SIM_LIB } from '@cmesh/testing';
import { DTYPES, DType } from '@cmesh/collectives';
import { NcclCommunicator, NcclSidecar, SidecarClient, spawnSidecar } from '@cmesh/collectives/nccl';
import { BENCH_OPS, BENCH_REDOPS, BenchMode, BenchOp, BenchRedop, JobAssignment, SizeSamplesMsg } from '@cmesh/protocol';
import { benchCollective, MemoryStore, NcclSweepCase, NcclSweepRow, runNcclSweep } from '@cmesh/bench';

import { JobAbortedError } from '../src/execution/job-runner';
import { DeviceNotNamedError, NcclJobRunner, SidecarLog } from '../src/runners/nccl-job-runner';

/** 8 B (count 0 for split ops at world 4), an uneven count, and a few KiB. */
const SIZES = [8, 96, 4096];

let binary: string;
const live: NcclSidecar[] = [];

beforeAll(() => {
  binary = buildSidecar(); // builds the simulation with the sidecar's tests
  expect(fs.existsSync(NCCL_SIM_LIB) && fs.existsSync(CUDART_SIM_LIB)).toBe(true);
}, 300_000);

afterEach(async () => {
  await Promise.all(live.splice(0).map((b) => b.stop()));
});

async function startWorld(n: number, envOf: (rank: number) => Record<string, string> = () => ({})): Promise<NcclSidecar[]> {
  const backends = Array.from(
    { length: n },
    (_, rank) =>
      new NcclSidecar({
        binary,
        ncclLib: NCCL_SIM_LIB,
        cudartLib: CUDART_SIM_LIB,
        env: { ...process.env, ...NCCL_SIM_ENV, ...envOf(rank) },
        requestTimeoutMs: 20_000,
      }),
  );
  live.push(...backends);
  const avail = await Promise.all(backends.map((b) => b.start()));
  for (const a of avail) expect(a).toEqual({ ok: true });
  return backends;
}

interface SweepArgs {
  collective: BenchOp;
  dtype: DType;
  redOp?: BenchRedop;
  /** more cases on the same communicator */
  cases?: NcclSweepCase[];
  modes?: BenchMode[];
  onRow?: (rank: number, row: NcclSweepRow) => void;
  timeoutMs?: number;
  signals?: AbortSignal[];
  devices?: number[];
}

function sweep(backends: NcclSidecar[], store: MemoryStore, key: string, a: SweepArgs): Promise<PromiseSettledResult<NcclSweepRow[]>[]> {
  return Promise.allSettled(
    backends.map((b, rank) =>
      runNcclSweep(b, {
        store,
        key,
        rank,
        worldSize: backends.length,
        device: a.devices?.[rank] ?? rank,
        cases: a.cases ?? [
          { collective: a.collective, dtype: a.dtype, redOp: a.redOp, root: benchCollective(a.collective).rooted ? backends.length - 1 : undefined },
        ],
        modes: a.modes,
        onRow: (row) => a.onRow?.(rank, row),
        sizes: SIZES,
        warmup: 1,
        iters: 2,
        timeoutMs: a.timeoutMs ?? 20_000,
        signal: a.signals?.[rank],
      }),
    ),
  );
}

function rowsOf(results: PromiseSettledResult<NcclSweepRow[]>[]): NcclSweepRow[][] {
  return results.map((r) => {
    if (r.status === 'rejected') throw r.reason;
    return r.value;
  });
}

async function resources(b: NcclSidecar): Promise<{ comms: number; buffers: number; bufferBytes: number }> {
  const r = (await b.helloNow()).resources;
  if (!r) throw new Error('the sidecar reports no resources');
  return r;
}

async function clientResources(c: SidecarClient): Promise<{ comms: number; buffers: number; bufferBytes: number }> {
  const r = (await c.hello()).resources;
  if (!r) throw new Error('the sidecar reports no resources');
  return r;
}

const FLOATS = new Set<DType>(['float16', 'bfloat16', 'float32', 'float64']);

describe('nccl backend over the simulated CUDA and NCCL', () => {
  it.each([1, 2, 4])(
    'world %i: every op, dtype and reduce op on one communicator, out of place and in place, checked element by element',
    async (n) => {
      const backends = await startWorld(n);
      const cases: NcclSweepCase[] = [];
      for (const collective of BENCH_OPS) {
        const reduces = benchCollective(collective).reduces;
        const root = benchCollective(collective).rooted ? n - 1 : undefined;
        for (const dtype of DTYPES) {
          const redOps: (BenchRedop | undefined)[] = reduces ? BENCH_REDOPS.filter((op) => op !== 'avg' || FLOATS.has(dtype)) : [undefined];
          for (const redOp of redOps) cases.push({ collective, dtype, redOp, root });
        }
      }
      // the sidecars' communicators while the sweep runs: one each, for the whole sweep
      const comms: Promise<number>[] = [];
      const perRank = rowsOf(
        await sweep(backends, new MemoryStore(), `sim/${n}`, {
          collective: 'allReduce',
          dtype: 'float32',
          cases,
          onRow: (rank, row) => {
            if (rank === 0 && row.sizeBytes === SIZES[SIZES.length - 1]) comms.push(resources(backends[0]).then((r) => r.comms));
          },
        }),
      );
      expect(new Set(await Promise.all(comms))).toEqual(new Set([1]));
      let checked = 0;
      const seen = new Set<string>();
      for (let i = 0; i < perRank[0].length; i++) {
        const rows = perRank.map((r) => r[i]);
        const r0 = rows[0];
        const label = `${r0.collective} ${r0.dtype} ${r0.redOp ?? ''} ${r0.mode} ${r0.sizeBytes} B world ${n}`;
        expect(rows.map((r) => `${r.collective} ${r.dtype} ${r.redOp ?? ''} ${r.mode} ${r.sizeBytes} B world ${n}`)).toEqual(rows.map(() => label));
        expect(r0.count).toBeGreaterThan(0); // steps below one element per rank are skipped
        seen.add(`${r0.collective}/${r0.mode}`);
        // Each rank whose output is defined checked all of it; none was wrong.
        const verified = rows.filter((r) => r.wrong !== null);
        expect({ label, verified: verified.length > 0, wrong: verified.map((r) => r.wrong) }).toEqual({ label, verified: true, wrong: verified.map(() => 0) });
        checked += verified.length;
        // every rank reports the same (slowest rank's) time for collectives all ranks call
        if (r0.collective !== 'sendRecv') expect(new Set(rows.map((r) => r.timeSeconds)).size).toBe(1);
      }
      // in place where torch and nccl-tests have it, out of place for every op
      const expected = BENCH_OPS.flatMap((op) => (benchCollective(op).inPlace === 'none' ? [`${op}/out-of-place`] : [`${op}/out-of-place`, `${op}/in-place`]));
      expect([...seen].sort()).toEqual(expected.sort());
      expect(checked).toBeGreaterThan(cases.length);
      for (const b of backends) expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
    },
    240_000,
  );

  it('in place: a skipped write cannot pass (all_gather and reduce_scatter at world 2 check the right block)', async () => {
    const backends = await startWorld(2);
    const perRank = rowsOf(
      await sweep(backends, new MemoryStore(), 'in-place', {
        collective: 'allGather',
        dtype: 'int32',
        modes: ['in-place'],
        cases: [
          { collective: 'allGather', dtype: 'int32' },
          { collective: 'reduceScatter', dtype: 'int32', redOp: 'sum' },
          { collective: 'allReduce', dtype: 'float16', redOp: 'max' },
          { collective: 'broadcast', dtype: 'bfloat16', root: 1 },
        ],
      }),
    );
    for (const rows of perRank) {
      expect(rows.every((r) => r.mode === 'in-place')).toBe(true);
      expect(rows.map((r) => r.wrong)).toEqual(rows.map(() => 0));
      expect(new Set(rows.map((r) => r.collective))).toEqual(new Set(['allGather', 'reduceScatter', 'allReduce', 'broadcast']));
    }
  }, 60_000);

  it('two ranks of one communicator on one device fail init naming the duplicate (the agent passes its own device)', async () => {
    const backends = await startWorld(2);
    const results = await sweep(backends, new MemoryStore(), 'dup', { collective: 'allReduce', dtype: 'float32', devices: [1, 1] });
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect(String((r as PromiseRejectedResult).reason.message)).toContain('Duplicate GPU detected');
    }
    for (const b of backends) expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
  }, 60_000);

  it('copies larger than the frame limit go in chunks of at most the advertised size', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-sim-'));
    const proc = await spawnSidecar({
      binary,
      socketPath: path.join(dir, 's.sock'),
      ncclLib: NCCL_SIM_LIB,
      cudartLib: CUDART_SIM_LIB,
      maxFrameBytes: 1 << 20,
      env: { ...process.env, ...NCCL_SIM_ENV },
    });
    const client = await SidecarClient.connect(proc.socketPath);
    try {
      expect((await client.hello()).limits.maxFrameBytes).toBe(1 << 20);
      const bytes = 3 * (1 << 20) + 5;
      const data = crypto.randomBytes(bytes);
      const buf = await client.alloc(0, bytes + 100);
      await client.copyIn(buf, data, 100);
      const back = await client.copyOut(buf, bytes, 100);
      expect(back.equals(data)).toBe(true);
      await client.free(buf);
    } finally {
      client.close();
      await proc.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('job cancel aborts at once: a collective hung on a stalled peer ends, and nothing is left behind', async () => {
    const backends = await startWorld(2, (rank): Record<string, string> => (rank === 1 ? { CMESH_SIM_FAULT: 'stall' } : {}));
    const controllers = backends.map(() => new AbortController());
    const t0 = Date.now();
    const running = sweep(backends, new MemoryStore(), 'cancel', {
      collective: 'allReduce',
      dtype: 'float32',
      timeoutMs: 30_000,
      signals: controllers.map((c) => c.signal),
    });
    await new Promise((r) => setTimeout(r, 800));
    for (const c of controllers) c.abort('job cancelled');
    const results = await running;
    expect(Date.now() - t0).toBeLessThan(6000); // not the 30 s timeout
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect(String((r as PromiseRejectedResult).reason.message)).toMatch(/abort/i);
    }
    for (const b of backends) expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
  }, 60_000);

  it('a killed peer: the healthy rank ends with an abort naming it, well within the timeout', async () => {
    const backends = await startWorld(2, (rank): Record<string, string> => (rank === 1 ? { CMESH_SIM_FAULT: 'die', CMESH_SIM_FAULT_AFTER: '1' } : {}));
    const t0 = Date.now();
    const [healthy, killed] = await sweep(backends, new MemoryStore(), 'killed', { collective: 'allReduce', dtype: 'float32', timeoutMs: 30_000 });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(killed.status).toBe('rejected'); // its sidecar is gone
    expect(healthy.status).toBe('rejected');
    const msg = String((healthy as PromiseRejectedResult).reason.message);
    expect(msg).toContain('communicator aborted');
    expect(msg).toContain('rank 1');
    expect(await resources(backends[0])).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
  }, 60_000);

  it('a failed launch aborts the communicator and frees its buffers; the sidecar stays usable', async () => {
    const [b] = await startWorld(1, () => ({ CMESH_SIM_FAULT: 'launch-fail' }));
    const [r] = await sweep([b], new MemoryStore(), 'launch-fail', { collective: 'allReduce', dtype: 'float32' });
    expect(r.status).toBe('rejected');
    const msg = String((r as PromiseRejectedResult).reason.message);
    expect(msg).toContain('simulated launch failure');
    expect(msg).toContain('communicator aborted');
    expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
  }, 60_000);

  it("a failed destroy in clean-up keeps a finished sweep's rows (and aborts instead)", async () => {
    const [b] = await startWorld(1, () => ({ CMESH_SIM_FAULT: 'finalize-fail' }));
    const [r] = await sweep([b], new MemoryStore(), 'finalize-fail', { collective: 'allReduce', dtype: 'float32' });
    expect(r.status).toBe('fulfilled');
    const rows = (r as PromiseFulfilledResult<NcclSweepRow[]>).value;
    expect(rows.map((row) => `${row.sizeBytes} ${row.mode} ${row.wrong}`)).toEqual(SIZES.flatMap((s) => [`${s} out-of-place 0`, `${s} in-place 0`]));
    expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
  }, 60_000);

  // A non-blocking communicator hands each grouped launch to a thread of NCCL's own (~55 us on an
  // H200, bench/RESULTS.md): init stays non-blocking (abortable), the ops run on a blocking
  // communicator split from it, unless the operator chose a mode or NCCL has no ncclCommSplit.
  it.each([
    ['unset', {}, { nonblocking: true, splitLaunches: true }, 'blocking'],
    ['NCCL_COMM_BLOCKING=0', { NCCL_COMM_BLOCKING: '0' }, { nonblocking: true, splitLaunches: false }, 'non-blocking'],
    ['NCCL_COMM_BLOCKING=1', { NCCL_COMM_BLOCKING: '1' }, { nonblocking: false, splitLaunches: false }, 'blocking'],
    ['NCCL 2.17 (no ncclCommSplit)', { CMESH_SIM_NCCL_VERSION: '21700' }, { nonblocking: true, splitLaunches: false }, 'non-blocking'],
  ])(
    'communicator modes, %s: the hello says which, the ops launch on it, all_to_all is right',
    async (_name, env, modes, launches) => {
      const backends = await startWorld(2, () => env as Record<string, string>);
      const store = new MemoryStore();
      const comms = await Promise.all(
        backends.map((b, rank) => {
          const { client, hello } = b.client('allToAll');
          expect({ nonblocking: hello.nccl.nonblocking, splitLaunches: hello.nccl.splitLaunches }).toEqual(modes);
          return NcclCommunicator.create(client, { store, key: `modes/${_name}`, rank, nranks: 2, device: rank, timeoutMs: 20_000 });
        }),
      );
      try {
        const count = 3;
        const got = await Promise.all(
          comms.map(async (comm, rank) => {
            expect(comm.launches).toBe(launches);
            await comm.reserve(2 * count * 4, 2 * count * 4, 20_000);
            const send = Float32Array.from({ length: 2 * count }, (_, i) => rank * 100 + Math.floor(i / count) * 10 + (i % count));
            await comm.writeSend(new Uint8Array(send.buffer), 20_000);
            await comm.collective({ collective: 'allToAll', count, dtype: 'float32', warmup: 0, iters: 1 }, 20_000);
            const out = await comm.readRecv(2 * count * 4, 20_000);
            return Array.from(new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength)));
          }),
        );
        // block j of rank r's output is block r of rank j's input
        expect(got).toEqual([0, 1].map((r) => [0, 1].flatMap((j) => [0, 1, 2].map((k) => j * 100 + r * 10 + k))));
      } finally {
        await Promise.all(comms.map((c) => c.close(true, 20_000)));
      }
      for (const b of backends) expect(await resources(b)).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
    },
    60_000,
  );

  it('no device memory or communicator is left after agent reconnects', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-sim-'));
    const proc = await spawnSidecar({
      binary,
      socketPath: path.join(dir, 's.sock'),
      ncclLib: NCCL_SIM_LIB,
      cudartLib: CUDART_SIM_LIB,
      env: { ...process.env, ...NCCL_SIM_ENV },
    });
    try {
      for (let i = 0; i < 3; i++) {
        // An agent that dies mid-job: a communicator and buffers, then the connection drops.
        const c = await SidecarClient.connect(proc.socketPath);
        const { comm } = await c.commInitRank({ nranks: 1, rank: 0, uniqueId: await c.getUniqueId(), device: 0 });
        const buf = await c.alloc(0, 1 << 16);
        await c.collective({ comm, collective: 'allReduce', count: 16, sendBuf: buf, recvBuf: buf, iters: 3 });
        c.close();
      }
      const probe = await SidecarClient.connect(proc.socketPath);
      try {
        let res = await clientResources(probe);
        for (let t = 0; t < 50 && (res.comms > 0 || res.buffers > 0); t++) {
          await new Promise((r) => setTimeout(r, 100));
          res = await clientResources(probe);
        }
        expect(res).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
      } finally {
        probe.close();
      }
    } finally {
      await proc.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("the agent's nccl job backend over the simulation", () => {
  function assignment(n: number, timeoutMs: number): JobAssignment {
    return {
      jobId: 'sim-job',
      sweep: {
        op: 'allReduce',
        dtype: 'float32',
        redop: 'sum',
        root: 0,
        sizes: [64, 4096],
        iters: 2,
        warmup: 1,
        check: true,
        modes: ['out-of-place'],
        timeoutMs,
        backend: 'nccl',
      },
      members: Array.from({ length: n }, (_, rank) => ({ agentId: `a${rank}`, name: `agent-${rank}`, rank })),
      storePrefix: 'jobs/sim-job',
      secret: 'job-secret-0123456789',
    };
  }

  async function agents(
    devices: number[],
    envOf: (rank: number) => Record<string, string> = () => ({}),
  ): Promise<{ jobs: NcclJobRunner[]; backends: NcclSidecar[] }> {
    const store = new MemoryStore();
    const backends = devices.map(
      (_, rank) => new NcclSidecar({ binary, ncclLib: NCCL_SIM_LIB, cudartLib: CUDART_SIM_LIB, env: { ...process.env, ...NCCL_SIM_ENV, ...envOf(rank) } }),
    );
    live.push(...backends);
    const jobs = backends.map((b, rank) => new NcclJobRunner(b, devices[rank], async () => Object.assign(store, { close: async () => undefined })));
    for (const j of jobs) expect(await j.start()).toEqual({ ok: true });
    return { jobs, backends };
  }

  it("NCCL_DEBUG's lines (the sidecar's stdout) reach the agent's log, tagged with the job they came during", async () => {
    const store = new MemoryStore();
    const lines: Array<{ line: string; stream: string; job: string | null }> = [];
    const jobs = [0, 1].map((device) => {
      const log = new SidecarLog((line, meta) => lines.push({ line, ...meta }));
      const b = new NcclSidecar({
        binary,
        ncclLib: NCCL_SIM_LIB,
        cudartLib: CUDART_SIM_LIB,
        env: { ...process.env, ...NCCL_SIM_ENV, NCCL_DEBUG: 'INFO' },
        onSidecarStdout: log.stdout,
        onSidecarStderr: log.stderr,
      });
      live.push(b);
      return new NcclJobRunner(b, device, async () => Object.assign(store, { close: async () => undefined }), { sidecarLog: log });
    });
    for (const j of jobs) expect(await j.start()).toEqual({ ok: true });
    const signal = new AbortController().signal;
    await Promise.all(jobs.map((j, rank) => j.run(assignment(2, 20_000), rank, { onJoined: () => undefined, onSize: () => undefined }, signal)));
    const init = lines.filter((l) => l.stream === 'stdout' && / NCCL INFO .*Init COMPLETE/.test(l.line));
    expect(init.length).toBeGreaterThanOrEqual(2); // each rank's sidecar, each communicator
    for (const l of init) expect(l.job).toBe('sim-job');
    expect(lines.some((l) => l.line.includes('"event":"listening"'))).toBe(false);
  }, 60_000);

  it('an agent told no device refuses to start where CUDA sees several, and starts where it sees one', async () => {
    const start = async (devices: string) => {
      const b = new NcclSidecar({
        binary,
        ncclLib: NCCL_SIM_LIB,
        cudartLib: CUDART_SIM_LIB,
        env: { ...process.env, ...NCCL_SIM_ENV, CMESH_SIM_DEVICES: devices },
      });
      live.push(b);
      return new NcclJobRunner(b, 0, async () => new MemoryStore(), { deviceNamed: false }).start();
    };
    const err = await start('4').catch((e: Error) => e);
    expect(err).toBeInstanceOf(DeviceNotNamedError);
    expect((err as Error).message).toContain(
      'this host has 4 CUDA devices and the agent was not told which is its own: set CMESH_DEVICE_INDEX (--device) or LOCAL_RANK',
    );
    expect(live[live.length - 1].socketPath).toBeNull(); // its sidecar was stopped
    expect(await start('1')).toEqual({ ok: true });
  }, 60_000);

  it("runs each rank on its agent's own device (never rank % device count)", async () => {
    // Agents configured for devices 1 and 0: fine. Both for device 1: NCCL's duplicate-GPU error,
    // where the rank-derived device (0 and 1) used to hide the agent's configuration.
    const ok = await agents([1, 0]);
    const samples: SizeSamplesMsg[][] = [[], []];
    const joined: string[] = [];
    const signal = new AbortController().signal;
    await Promise.all(
      ok.jobs.map((j, rank) => j.run(assignment(2, 20_000), rank, { onJoined: (d) => joined.push(d), onSize: (m) => samples[rank].push(m) }, signal)),
    );
    expect(joined.sort()).toEqual(['cuda:0 [nccl]', 'cuda:1 [nccl]']);
    for (const s of samples) expect(s.map((m) => m.variants.map((v) => `${v.mode} ${v.wrong}`))).toEqual([['out-of-place 0'], ['out-of-place 0']]);
    await Promise.all(live.splice(0).map((b) => b.stop()));

    const dup = await agents([1, 1]);
    const results = await Promise.allSettled(
      dup.jobs.map((j, rank) => j.run(assignment(2, 20_000), rank, { onJoined: () => undefined, onSize: () => undefined }, signal)),
    );
    for (const r of results) expect(String((r as PromiseRejectedResult).reason?.message)).toContain('Duplicate GPU detected');
  }, 60_000);

  it('job cancel aborts the communicator: the hung collective ends and the sidecars hold nothing', async () => {
    const { jobs, backends } = await agents([0, 1], (rank): Record<string, string> => (rank === 1 ? { CMESH_SIM_FAULT: 'stall' } : {}));
    const controllers = jobs.map(() => new AbortController());
    const running = Promise.allSettled(
      jobs.map((j, rank) => j.run(assignment(2, 30_000), rank, { onJoined: () => undefined, onSize: () => undefined }, controllers[rank].signal)),
    );
    await new Promise((r) => setTimeout(r, 800));
    const t0 = Date.now();
    for (const c of controllers) c.abort('job cancelled');
    for (const r of await running) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(JobAbortedError);
    // The sweep behind the job did not run on to its 30 s timeout: its communicator and buffers are gone.
    for (const b of backends) {
      let res = await resources(b);
      while (Date.now() - t0 < 5000 && (res.comms > 0 || res.buffers > 0)) {
        await new Promise((r) => setTimeout(r, 100));
        res = await resources(b);
      }
      expect(res).toEqual({ comms: 0, buffers: 0, bufferBytes: 0 });
    }
  }, 60_000);
});
