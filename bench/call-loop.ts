// The per-call cost of one small collective: ranks on this host (shared memory by default) each
// call it back to back, nothing in between, and rank 0 prints the mean time per call. What the
// nccl-tests-style tables cannot show: there a barrier precedes every op and the slowest rank's
// time is kept, so the cross-core wake-up and the ranks' skew dominate an 8 B cell.
//
//   node -r @swc-node/register bench/call-loop.ts [--op allReduce] [--world 2] [--iters 300000] [--count 2]
//   ops: allReduce, broadcast, allGather (a list), allGatherIntoTensor, reduceScatterTensor
import { fork } from 'child_process';
import { availableParallelism } from 'os';
import * as dist from '@cmesh/collectives';
import { freePort } from '@cmesh/testing';

const OPS = ['allReduce', 'broadcast', 'allGather', 'allGatherIntoTensor', 'reduceScatterTensor'] as const;
type Op = (typeof OPS)[number];

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const OP = arg('op', 'allReduce') as Op;
const WORLD = Number(arg('world', '2'));
const ITERS = Number(arg('iters', '300000'));
const COUNT = Number(arg('count', '2'));

async function rank(r: number, port: number): Promise<void> {
  await dist.initProcessGroup({ initMethod: `tcp://127.0.0.1:${port}`, rank: r, worldSize: WORLD, timeout: 60_000, bindToCore: r % availableParallelism() });
  const t = new Float32Array(COUNT).fill(1);
  const list = Array.from({ length: WORLD }, () => new Float32Array(COUNT));
  const flat = new Float32Array(COUNT * WORLD).fill(1);
  const call: Record<Op, () => Promise<void>> = {
    allReduce: () => dist.allReduce(t),
    broadcast: () => dist.broadcast(t, { src: 0 }),
    allGather: () => dist.allGather(list, t),
    allGatherIntoTensor: () => dist.allGatherIntoTensor(flat, t),
    reduceScatterTensor: () => dist.reduceScatterTensor(t, flat),
  };
  const one = call[OP];
  for (let i = 0; i < ITERS / 10; i++) await one();
  await dist.barrier();
  const t0 = performance.now();
  for (let i = 0; i < ITERS; i++) await one();
  const us = ((performance.now() - t0) * 1000) / ITERS;
  await dist.barrier();
  if (r === 0) console.log(`${OP} of ${COUNT * 4} B, world ${WORLD}, ${ITERS} calls: ${us.toFixed(2)} us per call`);
  await dist.destroyProcessGroup();
}

async function main(): Promise<void> {
  if (!OPS.includes(OP)) throw new Error(`--op must be one of ${OPS.join(', ')}, got ${OP}`);
  if (process.env.CALL_LOOP_RANK !== undefined) return rank(Number(process.env.CALL_LOOP_RANK), Number(process.env.CALL_LOOP_PORT));
  const port = await freePort();
  const ranks = Array.from({ length: WORLD }, (_, r) =>
    fork(__filename, process.argv.slice(2), {
      env: { ...process.env, CALL_LOOP_RANK: String(r), CALL_LOOP_PORT: String(port), LOCAL_WORLD_SIZE: String(WORLD) },
      execArgv: process.execArgv,
    }),
  );
  const codes = await Promise.all(ranks.map((p) => new Promise<number | null>((resolve) => p.once('exit', resolve))));
  if (codes.some((c) => c !== 0)) process.exitCode = 1;
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exit(1);
});
