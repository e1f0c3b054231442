// What the run's secret costs: connection set-up of a TcpStore client and of a 2-rank data plane
// (the challenge adds two round trips and four HMACs per connection), and the latency of a small
// allReduce on meshes made with and without a secret (frames carry no authentication, so it
// should not move). Two in-process ranks over TCP on loopback.
//   node -r @swc-node/register libs/collectives/test/bench/auth-overhead.ts [--quick]
// (in the library's tree: it builds meshes and backends below ProcessGroup, which the package does not export)
import { generateSecret, ProcessGroup, TcpStore } from '../../src';
import { TcpBackend } from '../../src/backends/tcp/tcp-backend';
import { Mesh } from '../../src/transport/mesh';

const quick = process.argv.includes('--quick');
const CONNECTS = quick ? 50 : 200;
const MESHES = quick ? 20 : 50;
const ITERS = quick ? 2000 : 10000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const us = (ns: bigint) => Number(ns) / 1000;

async function storeConnect(secret: string | undefined): Promise<number> {
  const master = await TcpStore.create({ port: 0, isMaster: true, secret });
  const times: number[] = [];
  for (let i = 0; i < CONNECTS; i++) {
    const t = process.hrtime.bigint();
    const c = await TcpStore.create({ port: master.port, secret });
    times.push(us(process.hrtime.bigint() - t));
    await c.close();
  }
  await master.close();
  return median(times);
}

async function meshPair(secret: string | undefined): Promise<{ meshes: Mesh[]; store: TcpStore; us: number }> {
  const store = await TcpStore.create({ port: 0, isMaster: true });
  const t = process.hrtime.bigint();
  const meshes = await Promise.all([0, 1].map((rank) => Mesh.create({ rank, size: 2, store, timeoutMs: 10_000, transport: 'tcp', secret })));
  return { meshes, store, us: us(process.hrtime.bigint() - t) };
}

async function meshSetup(secret: string | undefined): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < MESHES; i++) {
    const { meshes, store, us: t } = await meshPair(secret);
    times.push(t);
    for (const m of meshes) await m.close();
    await store.close();
  }
  return median(times);
}

async function allReduceLatency(secret: string | undefined): Promise<number> {
  const { meshes, store } = await meshPair(secret);
  const pgs = meshes.map((m, rank) => new ProcessGroup(0, [0, 1], rank, new TcpBackend(m, 0, [0, 1]), 10_000));
  const bufs = [new Float32Array(2), new Float32Array(2)];
  const run = () => Promise.all(pgs.map((pg, r) => pg.allReduce(bufs[r])));
  for (let i = 0; i < 500; i++) await run();
  const t = process.hrtime.bigint();
  for (let i = 0; i < ITERS; i++) await run();
  const per = us(process.hrtime.bigint() - t) / ITERS;
  for (const m of meshes) await m.close();
  await store.close();
  return per;
}

async function main(): Promise<void> {
  const secret = generateSecret();
  const rows: [string, number, number][] = [];
  rows.push(['TcpStore client connect (median, us)', await storeConnect(undefined), await storeConnect(secret)]);
  rows.push(['2-rank data plane set-up (median, us)', await meshSetup(undefined), await meshSetup(secret)]);
  // alternate, so that drift of a loaded machine hits both
  const lat: [number[], number[]] = [[], []];
  for (let k = 0; k < 3; k++) {
    lat[0].push(await allReduceLatency(undefined));
    lat[1].push(await allReduceLatency(secret));
  }
  rows.push(['allReduce 8 B, 2 ranks (us per call, median of 3 runs)', median(lat[0]), median(lat[1])]);
  console.log('| what | no secret | with secret |');
  console.log('| --- | ---: | ---: |');
  for (const [what, a, b] of rows) console.log(`| ${what} | ${a.toFixed(1)} | ${b.toFixed(1)} |`);
}

void main();
