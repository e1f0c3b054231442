// The multi-GPU first run's checks, every rank of this node in one process (a sidecar each, the
// rank agents' path: NcclSidecar, NcclCommunicator), NCCL_DEBUG=INFO on every sidecar:
//  1. devices and transports: each rank's communicator runs on the rank's own GPU (NCCL's
//     "cudaDev N" at Init COMPLETE) and which transport each channel took (P2P, SHM, NET);
//  2. two process groups issued in opposite orders on alternate ranks, on the same sidecars:
//     both finish (no deadlock between communicators);
//  3. a dead peer: the last rank's sidecar is killed (SIGKILL) mid-collective; every other rank
//     must end with an error naming that rank, no later than its own deadline.
// World 1 runs 1 and 2 (two communicators on one GPU, concurrently) and says why 3 needs a second GPU.
// One node:  node -r @swc-node/register scripts/gpu-check/first-run.ts --world N
// Two nodes: ... first-run.ts --nnodes 2 --node-rank R --nproc-per-node G --master-addr HOST0 --master-port 29534
// --timeout-ms (each op's deadline in check 3, default 10000). Exit status 1 when a check fails.
import { MemoryStore, parseNcclLog, transportsByKind } from '@cmesh/bench';
import { NcclCommunicator, NcclSidecar } from '@cmesh/collectives/nccl';
import { Store, TcpStore } from '@cmesh/collectives';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const SETUP_TIMEOUT_MS = 120_000;
const MiB = 1 << 20;

interface Rank {
  rank: number;
  device: number;
  sidecar: NcclSidecar;
  log: string[];
}

let failed = 0;
function verdict(ok: boolean, text: string): void {
  if (!ok) failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'}  ${text}`);
}

async function communicators(ranks: Rank[], store: Store, key: string, world: number, timeoutMs: number): Promise<NcclCommunicator[]> {
  return Promise.all(
    ranks.map((r) => NcclCommunicator.create(r.sidecar.client('allReduce').client, { store, key, rank: r.rank, nranks: world, device: r.device, timeoutMs })),
  );
}

/** 1. Each rank's device and its channels' transports, from NCCL's INFO lines. */
async function devicesAndTransports(ranks: Rank[], store: Store, world: number, nnodes: number): Promise<void> {
  console.log('\n## 1. devices and transports (NCCL_DEBUG=INFO)');
  for (const r of ranks) r.log.length = 0;
  const comms = await communicators(ranks, store, 'first-run/transports', world, SETUP_TIMEOUT_MS);
  try {
    // one all-reduce of 1 MiB: NCCL connects the ring's channels lazily, at the first op
    await Promise.all(
      comms.map(async (c) => {
        await c.reserve(MiB, MiB, SETUP_TIMEOUT_MS);
        await c.collective({ collective: 'allReduce', count: MiB / 4, dtype: 'float32', warmup: 0, iters: 1 }, SETUP_TIMEOUT_MS);
      }),
    );
  } finally {
    await Promise.all(comms.map((c) => c.close(true, SETUP_TIMEOUT_MS)));
  }
  // NCCL's lines come through the sidecars' stdout pipes, which may trail the replies a little
  await new Promise((res) => setTimeout(res, 300));
  for (const r of ranks) {
    const { inits, channels } = parseNcclLog(r.log);
    const mine = inits.find((i) => i.rank === r.rank && i.nranks === world);
    verdict(
      mine?.cudaDev === r.device,
      `rank ${r.rank}: NCCL's communicator on cudaDev ${mine ? mine.cudaDev : '? (no "Init COMPLETE" line with cudaDev in its log)'}` +
        `${mine?.busId ? ` busId ${mine.busId}` : ''}, the rank's device ${r.device}`,
    );
    const peers = [...new Set(channels.filter((c) => c.from === r.rank || c.to === r.rank).map((c) => `${c.from}->${c.to} via ${c.via}`))];
    const kinds = transportsByKind(channels);
    if (world === 1) console.log(`      rank ${r.rank}: world 1 has no peer, no channel (NCCL runs the op on the GPU alone)`);
    else {
      console.log(
        `      rank ${r.rank}: ${
          Object.entries(kinds)
            .map(([k, v]) => `${k} (${v.join(', ')})`)
            .join('; ') || 'no channel line'
        }`,
      );
      for (const p of peers.slice(0, 4)) console.log(`        ${p}`);
      if (peers.length > 4) console.log(`        ... ${peers.length - 4} more`);
      // ranks of one node should share memory or NVLink/PCIe; the network is for other nodes
      if (nnodes === 1)
        verdict(channels.length > 0 && !kinds.NET, `rank ${r.rank}: every channel within the node, none over NET (${channels.length} channel lines)`);
      else
        verdict(
          channels.length > 0,
          `rank ${r.rank}: ${channels.length} channel lines (NET between nodes: ${kinds.NET ? kinds.NET.join(', ') : 'none seen from this rank'})`,
        );
    }
  }
}

/** 2. Two communicators on the same sidecars, issued in opposite orders on alternate ranks. */
async function oppositeOrders(ranks: Rank[], store: Store, world: number): Promise<void> {
  console.log('\n## 2. two process groups issued in opposite orders');
  const a = await communicators(ranks, store, 'first-run/group-a', world, SETUP_TIMEOUT_MS);
  const b = await communicators(ranks, store, 'first-run/group-b', world, SETUP_TIMEOUT_MS);
  const t0 = Date.now();
  const deadline = 60_000;
  let ok = true;
  try {
    await Promise.all([...a, ...b].map((c) => c.reserve(4 * MiB, 4 * MiB, SETUP_TIMEOUT_MS)));
    const run = (c: NcclCommunicator) => c.collective({ collective: 'allReduce', count: MiB, dtype: 'float32', warmup: 0, iters: 50 }, deadline);
    // even ranks issue group A then B, odd ranks B then A, both without waiting: with one queue
    // per sidecar each rank's first op would wait for a peer that waits on its second
    await Promise.all(
      ranks.map((r, i) => {
        const [first, second] = r.rank % 2 === 0 ? [a[i], b[i]] : [b[i], a[i]];
        const p1 = run(first);
        const p2 = run(second);
        return Promise.all([p1, p2]);
      }),
    );
  } catch (e) {
    ok = false;
    console.log(`      ${(e as Error).message}`);
  } finally {
    await Promise.all([...a, ...b].map((c) => c.close(ok, SETUP_TIMEOUT_MS)));
  }
  const note = world === 1 ? ' (world 1: two communicators on one GPU at once; the cross-rank order needs a second GPU)' : '';
  verdict(ok, `both groups finished in ${Date.now() - t0} ms, 50 all-reduces of 4 MiB each${note}`);
}

/** 3. The last rank's sidecar killed mid-collective: the others end at their deadline, naming it. */
async function deadPeer(ranks: Rank[], store: Store, world: number, timeoutMs: number): Promise<void> {
  console.log('\n## 3. a dead peer');
  if (world < 2) {
    console.log('skip  needs a second GPU: the last rank is killed while the others wait on it');
    return;
  }
  const victim = world - 1;
  const comms = await communicators(ranks, store, 'first-run/dead-peer', world, SETUP_TIMEOUT_MS);
  await Promise.all(comms.map((c) => c.reserve(4 * MiB, 4 * MiB, SETUP_TIMEOUT_MS)));
  const started = Date.now();
  const outcomes = ranks.map((r, i) => {
    const t0 = Date.now();
    return comms[i].collective({ collective: 'allReduce', count: MiB, dtype: 'float32', warmup: 0, iters: 1_000_000 }, timeoutMs).then(
      () => ({ r, ms: Date.now() - t0, error: null as Error | null }),
      (e: Error) => ({ r, ms: Date.now() - t0, error: e }),
    );
  });
  await new Promise((res) => setTimeout(res, 1500));
  const mine = ranks.find((r) => r.rank === victim);
  if (mine) {
    const pid = mine.sidecar.sidecarPid;
    console.log(`      killing rank ${victim}'s sidecar (pid ${pid}) ${Date.now() - started} ms into the op`);
    if (pid) process.kill(pid, 'SIGKILL');
  }
  for (const o of await Promise.all(outcomes)) {
    if (o.r.rank === victim) continue;
    const msg = o.error?.message ?? 'no error';
    const named = new RegExp(`\\brank ${victim}\\b`).test(msg);
    verdict(
      !!o.error && o.ms <= timeoutMs + 2000 && named,
      `rank ${o.r.rank}: ended after ${o.ms} ms (deadline ${timeoutMs} ms), ${named ? 'naming' : 'NOT naming'} rank ${victim}` +
        `${!named && o.error ? ' (NCCL did not report the lost peer; the deadline ended the op)' : ''}: ${msg.slice(0, 300)}`,
    );
  }
  await Promise.all(comms.map((c) => c.abort()));
}

async function main(): Promise<number> {
  const nnodes = Number(arg('nnodes', '1'));
  const nodeRank = Number(arg('node-rank', '0'));
  const local = Number(arg('nproc-per-node', arg('world', '1')));
  const world = nnodes * local;
  const timeoutMs = Number(arg('timeout-ms', '10000'));
  const masterAddr = arg('master-addr', '127.0.0.1');
  const masterPort = Number(arg('master-port', '29534'));
  const env = { ...process.env, NCCL_DEBUG: 'INFO' };
  const ranks: Rank[] = Array.from({ length: local }, (_, i) => {
    const log: string[] = [];
    return {
      rank: nodeRank * local + i,
      device: i,
      log,
      sidecar: new NcclSidecar({ ncclLib: process.env.CMESH_NCCL_LIB, env, onSidecarStdout: (l) => log.push(l) }),
    };
  });
  let store: Store | null = null;
  try {
    const avail = await Promise.all(ranks.map((r) => r.sidecar.start()));
    const bad = avail.find((a) => !a.ok);
    if (bad) {
      console.log(`nccl backend unavailable: ${bad.reason}`);
      return 1;
    }
    const hello = ranks[0].sidecar.hello!;
    console.log(
      `# first run: world ${world} (${nnodes} node(s), this is node ${nodeRank} with ranks ${ranks[0].rank}..${ranks[local - 1].rank} on devices 0..${local - 1})`,
    );
    console.log(`# NCCL ${hello.nccl.versionString}, devices ${hello.devices.map((d) => `${d.index}:${d.name}`).join(', ')}`);
    store =
      nnodes === 1
        ? new MemoryStore()
        : await TcpStore.create({
            host: masterAddr,
            port: masterPort,
            isMaster: nodeRank === 0,
            worldSize: nnodes,
            timeoutMs: SETUP_TIMEOUT_MS,
            secret: process.env.CMESH_SECRET ?? 'cmesh-gpu-check-two-nodes',
          });
    await devicesAndTransports(ranks, store, world, nnodes);
    await oppositeOrders(ranks, store, world);
    await deadPeer(ranks, store, world, timeoutMs);
  } catch (e) {
    verdict(false, `first run stopped: ${(e as Error).message}`);
  } finally {
    await Promise.all(ranks.map((r) => r.sidecar.stop()));
    await store?.close();
  }
  console.log(`\n# first run: ${failed === 0 ? 'every check passed' : `${failed} check(s) failed`}`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
