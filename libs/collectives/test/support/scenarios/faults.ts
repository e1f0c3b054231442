// Failures that must not hang: a rank that dies mid-all-reduce, a rank that never calls (timeout),
// and ranks calling different collectives (mismatch).
import * as dist from '../../../src';

export async function run(args: { mode: 'kill' | 'timeout' | 'mismatch' }): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const t = new Float32Array(1 << 18).fill(1);
  const started = Date.now();
  try {
    if (args.mode === 'kill') {
      for (let i = 0; i < 200; i++) {
        if (rank === 2 && i === 3) process.kill(process.pid, 'SIGKILL');
        await dist.allReduce(t);
      }
    } else if (args.mode === 'timeout') {
      if (rank !== 1) await dist.allReduce(t, { timeout: 1000 });
      else await new Promise((r) => setTimeout(r, 3000));
    } else {
      if (rank === 0) await dist.broadcast(t, { src: 0 });
      else await dist.allReduce(t);
    }
    return { ok: true };
  } catch (e) {
    const err = e as dist.CmeshError;
    return { name: err.name, message: err.message, context: err.context, afterMs: Date.now() - started };
  }
}
