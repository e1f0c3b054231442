// Wall time of a fabric scan on this machine: nats-server, the coordinator and N rank agents as
// processes on loopback (agents of one host talk over shared memory), then `--scans` scans of
// every agent (POST /scans, the CLI's defaults: 8 B and 4 MiB, 5 iterations, ring all-reduces) and
// one line per scan: wall time, rounds, pairs, jobs, verdict. Everything started is stopped.
//
//   node -r @swc-node/register bench/scan/wall-time.ts [--agents 16] [--scans 2] [--bandwidth-size 4194304]
import { startNatsServer } from '@cmesh/testing';
import { runScan } from '@cmesh/cli/commands';
import { startMesh } from '@cmesh/testing/mesh';

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
};
const AGENTS = Number(arg('agents', '16'));
const SCANS = Number(arg('scans', '2'));
const BW = Number(arg('bandwidth-size', String(4 << 20)));

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const lines: string[] = [];
  const mesh = await startMesh({ agents: AGENTS, natsUrl: nats.url, port: 0, write: (l) => lines.push(l), readyTimeoutMs: 180_000 }).catch(async (e) => {
    await nats.stop();
    throw e;
  });
  try {
    for (let i = 0; i < SCANS; i++) {
      const t0 = Date.now();
      const s = await runScan(mesh.client, { bandwidthBytes: BW }, { timeoutMs: 30 * 60_000 });
      const jobs = s.links.reduce((n, l) => n + (l.samples ?? 1), 0) + s.collectives.length;
      console.log(
        `scan ${i + 1}/${SCANS}: ${AGENTS} agents, ${s.rounds} rounds, ${s.links.length} pairs, ${jobs} jobs: ` +
          `${((s.wallMs ?? 0) / 1000).toFixed(1)} s in the coordinator, ${((Date.now() - t0) / 1000).toFixed(1)} s for the client; ${s.state}: ${s.findings?.verdict ?? s.reason}`,
      );
    }
  } finally {
    await mesh.stop();
    await nats.stop();
  }
}

main().catch((e: Error) => {
  console.error(`wall-time: ${e.message}`);
  process.exit(1);
});
