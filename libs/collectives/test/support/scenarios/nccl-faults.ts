// Faults on the nccl backend (world 2, over the simulation). `timeout`: rank 1 never joins an
// all-reduce, so rank 0's times out naming the group, and its communicator is aborted (later ops
// fail at once, naming the first failure). `peer-dies`: rank 1's sidecar is killed inside a
// collective (the simulation's `die` fault); both ranks' ops end with typed errors well within
// the timeout.
import * as dist from '../../../src';

function describe(e: unknown): Record<string, unknown> {
  const err = e as Error & { code?: string; sidecarCode?: string; context?: unknown };
  return { name: err.name, code: err.code, sidecarCode: err.sidecarCode ?? null, message: err.message, context: err.context ?? null };
}

export async function run(args: { fault: 'timeout' | 'peer-dies' }): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ backend: 'nccl', timeout: 20000 });
  const rank = dist.getRank();
  const out: Record<string, unknown> = {};
  const warm = new Float32Array([rank + 1]);
  await dist.allReduce(warm);
  out.warm = warm[0];
  const started = Date.now();
  if (args.fault === 'timeout') {
    if (rank === 0) {
      out.first = await dist.allReduce(new Float32Array(8), { timeout: 1500 }).then(() => null, describe);
      out.firstMs = Date.now() - started;
      out.next = await dist.allReduce(new Float32Array(8)).then(() => null, describe);
      out.nextMs = Date.now() - started - (out.firstMs as number);
    } else {
      // rank 1 stays out of it, alive (a rank that destroys its communicator is a peer gone)
      await new Promise((r) => setTimeout(r, 2500));
    }
  } else {
    out.error = await dist.allReduce(new Float32Array(1024), { timeout: 15000 }).then(() => null, describe);
    // the survivor may have its result before the peer's sidecar dies; its next op cannot
    if (out.error === null && rank === 0) out.error = await dist.allReduce(new Float32Array(1024), { timeout: 15000 }).then(() => null, describe);
    out.ms = Date.now() - started;
  }
  await dist.destroyProcessGroup();
  out.totalMs = Date.now() - started;
  return out;
}
