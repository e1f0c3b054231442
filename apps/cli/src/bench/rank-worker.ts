// Entry point of one local rank of `cmesh bench`: joins the process group (env://), runs the
// sweeps in turn and streams their samples to the parent over IPC.
import * as dist from '@cmesh/collectives';
import { hostname } from 'os';
import type { ParentMessage, RankMessage } from './ipc';
import { runRankSweep } from '@cmesh/bench';

function send(msg: RankMessage): Promise<void> {
  return new Promise((resolve, reject) => process.send!(msg, undefined, {}, (err) => (err ? reject(err) : resolve())));
}

async function main(sweepMsg: ParentMessage): Promise<void> {
  const rank = Number(process.env.RANK);
  try {
    await dist.initProcessGroup({ backend: 'tcp', initMethod: 'env://', timeout: sweepMsg.sweeps[0].timeoutMs });
    await send({ type: 'hello', info: { rank, pid: process.pid, host: hostname(), device: `cpu [${sweepMsg.backend}]` } });
    const pending: Promise<void>[] = [];
    for (const [i, sweep] of sweepMsg.sweeps.entries()) {
      await runRankSweep({ dist, sweep, onSize: (samples) => pending.push(send({ type: 'size', rank, sweep: i, samples })) });
    }
    await Promise.all(pending);
    await dist.destroyProcessGroup();
    await send({ type: 'done', rank });
    process.disconnect();
  } catch (err) {
    const e = err as Error;
    await send({ type: 'error', rank, message: `${e.name}: ${e.message}` }).catch(() => undefined);
    process.exit(1);
  }
}

if (!process.send) {
  console.error('rank-worker is started by `cmesh bench` (needs an IPC channel)');
  process.exit(2);
}
process.once('message', (m: ParentMessage) => void main(m));
