// GPU check, cmesh side: @cmesh/bench's nccl sweep (the rank agents' nccl path) through the
// sidecar, every rank of this node in one process (a sidecar and a GPU each), one communicator
// for the whole sweep: every collective and dtype, out of place and in place, checked, printed as
// nccl-tests prints it (-d all: one table per collective, every type in it).
// One node:  node -r @swc-node/register scripts/gpu-check/nccl-sweep.ts --world N
// Two nodes (torchrun's flags; ranks node_rank * nproc_per_node + local rank; the unique id goes
// through a TcpStore on node 0, NCCL over NCCL_SOCKET_IFNAME / IB as it chooses):
//   ... nccl-sweep.ts --nnodes 2 --node-rank R --nproc-per-node G --master-addr HOST0 --master-port 29532
// Options: --min B --max B --dtype all|float32,... --ops allReduce,... --iters 20 --warmup 5
//   --check-max B (check sizes up to B; larger are timed, #wrong N/A) --json FILE (the rows)
import * as fs from 'fs';
import * as os from 'os';

import { MemoryStore, NcclSweepRow, benchSizes, formatFooter, formatHeader, formatRow, hasRoot, ncclBenchRows, ncclTestsOp, runNcclSweep } from '@cmesh/bench';
import { DTYPES, DType, Store, TcpStore, isDType, ncclCapabilities } from '@cmesh/collectives';
import { NcclSidecar } from '@cmesh/collectives/nccl';
import { BENCH_OPS, BenchOp } from '@cmesh/protocol';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

/** The store the ranks find NCCL's unique id in: in process on one node, node 0's TcpStore across nodes. */
async function openStore(nnodes: number, nodeRank: number, addr: string, port: number): Promise<Store> {
  if (nnodes === 1) return new MemoryStore();
  return TcpStore.create({
    host: addr,
    port,
    isMaster: nodeRank === 0,
    worldSize: nnodes,
    timeoutMs: 300_000,
    secret: process.env.CMESH_SECRET ?? 'cmesh-gpu-check-two-nodes',
  });
}

async function main(): Promise<number> {
  const nnodes = Number(arg('nnodes', '1'));
  const nodeRank = Number(arg('node-rank', '0'));
  const local = Number(arg('nproc-per-node', arg('world', '1')));
  const world = nnodes * local;
  const masterAddr = arg('master-addr', '127.0.0.1');
  const masterPort = Number(arg('master-port', '29532'));
  if (!(nnodes >= 1 && nodeRank >= 0 && nodeRank < nnodes && local >= 1)) {
    console.log('usage: --world N, or --nnodes M --node-rank R --nproc-per-node G --master-addr A --master-port P');
    return 1;
  }
  const sizes = benchSizes(Number(arg('min', '8')), Number(arg('max', String(64 << 20))), 2);
  const iters = Number(arg('iters', '20'));
  const warmup = Number(arg('warmup', '5'));
  const checkMax = Number(arg('check-max', String(Number.MAX_SAFE_INTEGER)));
  if (!(warmup >= 1)) {
    // The first iterations set up NCCL's connections lazily; timing them would skew the row.
    console.log('--warmup must be at least 1');
    return 1;
  }
  const sidecars = Array.from({ length: local }, () => new NcclSidecar({ ncclLib: process.env.CMESH_NCCL_LIB }));
  let store: Store | null = null;
  let failures = 0;
  try {
    const avail = await Promise.all(sidecars.map((b) => b.start()));
    const bad = avail.find((a) => !a.ok);
    if (bad) {
      console.log(`nccl backend unavailable: ${bad.reason}`);
      return 1;
    }
    const hello = sidecars[0].hello!;
    // -d all: every dtype this NCCL has (bfloat16 and avg from 2.10)
    const caps = ncclCapabilities(hello.nccl.version);
    const dtypeArg = arg('dtype', 'all');
    const dtypes: DType[] = dtypeArg === 'all' ? DTYPES.filter((d) => caps.dtypes.has(d)) : dtypeArg.split(',').filter(isDType);
    if (dtypes.length === 0) {
      console.log(`--dtype: none of ${dtypeArg} is a dtype (${DTYPES.join(', ')})`);
      return 1;
    }
    const only = arg('ops', '').split(',').filter(Boolean);
    const ops: BenchOp[] = BENCH_OPS.filter((op) => only.length === 0 || only.includes(op));
    console.log(
      `# cmesh nccl sidecar: NCCL ${hello.nccl.versionString} (${hello.nccl.library}), CUDA runtime ${hello.cuda.runtimeVersion}, ` +
        `devices: ${hello.devices.map((d) => `${d.index}:${d.name}`).join(', ')}; world ${world} (${nnodes} node(s), node ${nodeRank} on ${os.hostname()}), ` +
        `types ${dtypes.join(',')}, warmup ${warmup}, iters ${iters}; one communicator for the sweep`,
    );
    store = await openStore(nnodes, nodeRank, masterAddr, masterPort);
    const cases = ops.flatMap((collective) => dtypes.map((dtype) => ({ collective, dtype, root: hasRoot(collective) ? 0 : undefined })));
    const perRank: NcclSweepRow[][] = await Promise.all(
      sidecars.map((b, i) =>
        runNcclSweep(b, {
          store: store!,
          key: `gpu-check/w${world}`,
          rank: nodeRank * local + i,
          worldSize: world,
          device: i,
          cases,
          sizes,
          warmup,
          iters,
          verifyMaxBytes: checkMax,
        }),
      ),
    );
    // Rows of this node's ranks: the time is every rank's slowest (the sidecar's max over all
    // ranks); wrong elements are this node's (node 0 prints; another node prints its own).
    const rows = ncclBenchRows(perRank, iters);
    for (const op of ops) {
      const mine = rows.filter((r) => r.op === op);
      console.log([`# ${ncclTestsOp(op)} (cmesh nccl sidecar, world ${world})`, ...formatHeader(), ...mine.map(formatRow), ...formatFooter(mine)].join('\n'));
      failures += mine.filter((r) => (r.outOfPlace?.wrong ?? 0) + (r.inPlace?.wrong ?? 0) > 0).length;
    }
    const json = arg('json', '');
    if (json) fs.writeFileSync(json, JSON.stringify(rows));
  } catch (e) {
    failures++;
    console.log(`# FAILED: ${(e as Error).message}`);
  } finally {
    await Promise.all(sidecars.map((b) => b.stop()));
    await store?.close();
  }
  console.log(`# cmesh nccl sweep world ${world}: ${failures === 0 ? 'all verified' : `${failures} rows wrong or failed`}`);
  return failures === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
