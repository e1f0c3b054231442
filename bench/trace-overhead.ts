// The flight recorder's cost on the smallest collective: 2 ranks on this host, all_reduce of 2
// float32 (8 bytes), timed with the recorder off (CMESH_TRACE_BUFFER_SIZE=0) and on (the default,
// 2000 entries), alternating rounds in the same processes (a new process group each round) so both
// see the same machine load, layout and core placement (rank r bound to CPU r, as `cmesh bench`
// binds). Prints the mean time per call of every round and the median of each setting.
// --world 1: one rank in this process, so the call path alone is measured (validation, plan, the
// backend, the timer and the recorder, no peer) in CPU time per call, which a loaded machine
// disturbs much less than latency; the minimum over rounds is printed too.
//
//   node -r @swc-node/register bench/trace-overhead.ts [--world 2|1] [--rounds 6] [--iters 20000] [--transport shm|tcp]
import * as dist from '@cmesh/collectives';
import { freePort } from '@cmesh/testing';

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const ROUNDS = Number(arg('rounds', '6'));
const ITERS = Number(arg('iters', '20000'));
const TRANSPORT = arg('transport', 'shm') as 'shm' | 'tcp';
const WORLD = Number(arg('world', '2'));
const SIZES = [0, dist.DEFAULT_TRACE_BUFFER_SIZE];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function rank(r: number, ports: number[], world = 2): Promise<void> {
  const results: Record<number, number[]> = { 0: [], [SIZES[1]]: [] };
  const t = new Float32Array(2);
  let k = 0;
  for (let round = 0; round < ROUNDS; round++) {
    // alternate which setting goes first, so neither always follows the other
    const order = round % 2 ? [...SIZES].reverse() : SIZES;
    for (const size of order) {
      dist.resetFlightRecorder(size);
      await dist.initProcessGroup({
        initMethod: `tcp://127.0.0.1:${ports[k++]}`,
        rank: r,
        worldSize: world,
        transport: TRANSPORT,
        timeout: 60_000,
        bindToCore: r,
      });
      for (let i = 0; i < ITERS / 10; i++) await dist.allReduce(t);
      await dist.barrier();
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      for (let i = 0; i < ITERS; i++) await dist.allReduce(t);
      // one rank: CPU time (all of the process's threads), which time spent descheduled on a busy
      // machine does not inflate; two ranks: wall time per call, the latency
      const cpu = process.cpuUsage(c0);
      const us = world === 1 ? (cpu.user + cpu.system) / ITERS : ((performance.now() - t0) * 1000) / ITERS;
      results[size].push(us);
      if (size > 0 && dist.getTrace().entries.length !== size) throw new Error('the recorder did not record');
      await dist.destroyProcessGroup();
    }
  }
  if (r === 0) {
    const off = median(results[0]);
    const on = median(results[SIZES[1]]);
    const min = (xs: number[]) => Math.min(...xs);
    console.log(
      `${world === 1 ? 'one rank (the call path alone, CPU time per call)' : `transport ${TRANSPORT}, 2 ranks (wall time per call)`}, all_reduce 8 B, ${ITERS} calls per round, ${ROUNDS} rounds`,
    );
    console.log(`recorder off  (0):    ${results[0].map((x) => x.toFixed(2)).join(' ')} us; median ${off.toFixed(2)}, min ${min(results[0]).toFixed(2)} us`);
    console.log(
      `recorder on (${SIZES[1]}): ${results[SIZES[1]].map((x) => x.toFixed(2)).join(' ')} us; median ${on.toFixed(2)}, min ${min(results[SIZES[1]]).toFixed(2)} us`,
    );
    console.log(
      `overhead: ${(on - off).toFixed(2)} us per call (${(((on - off) / off) * 100).toFixed(1)} %) by the medians, ${(min(results[SIZES[1]]) - min(results[0])).toFixed(2)} us by the minima`,
    );
  }
}

if (WORLD === 1) {
  void (async () => {
    const ports: number[] = [];
    for (let i = 0; i < ROUNDS * 2; i++) ports.push(await freePort());
    await rank(0, ports, 1);
  })();
} else if (process.env.CMESH_SPAWN_RANK === undefined) {
  void (async () => {
    const ports: number[] = [];
    for (let i = 0; i < ROUNDS * 2; i++) ports.push(await freePort());
    await dist.spawn(rank, { nprocs: 2, args: [ports] });
  })();
} else void dist.spawn(rank, { nprocs: 2 });
