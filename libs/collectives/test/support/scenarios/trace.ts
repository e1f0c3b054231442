// Flight recorder: 20 all-reduces on every rank, then rank 1 stops joining: it sleeps (idle),
// waits in a recv from rank 3 that never comes (p2p), or blocks its event loop (spin: it cannot
// answer the others' exchange). The others' all-reduce #20 times out and its
// error must name rank 1 with the last collective it finished. Every rank stays up long enough to
// answer the others' exchange, and writes its dump when CMESH_TRACE_DUMP_DIR is set.
import * as fs from 'fs';
import * as dist from '../../../src';

export async function run(args: { mode: 'idle' | 'p2p' | 'spin' }): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const t = new Float32Array(64).fill(1);
  for (let i = 0; i < 20; i++) await dist.allReduce(t);
  const dumpDir = process.env.CMESH_TRACE_DUMP_DIR;
  let result: Record<string, unknown> = { ok: true };
  if (rank === 1) {
    if (args.mode === 'p2p') {
      const r = await dist.recv(new Int32Array(4), { src: 3, timeout: 8000 }).then(
        () => 'received',
        (e: Error) => e.name,
      );
      result = { recv: r };
    } else if (args.mode === 'spin') {
      for (const end = Date.now() + 6000; Date.now() < end; ); // a rank stuck in its own code
      await new Promise((r) => setTimeout(r, 2000));
    } else await new Promise((r) => setTimeout(r, 8000));
  } else {
    const started = Date.now();
    const err = await dist.allReduce(t, { timeout: 1500 }).then(
      () => undefined,
      (e: dist.DistTimeoutError) => e,
    );
    if (err) result = { name: err.name, message: err.message, context: err.context, desync: err.desync, afterMs: Date.now() - started };
    // stay up for the others' exchange (they time out at about the same moment)
    await new Promise((r) => setTimeout(r, 6500 - (Date.now() - started)));
  }
  if (dumpDir) result.dumpFile = fs.existsSync(`${dumpDir}/cmesh_trace_rank_${rank}.json`);
  result.trace = dist.getTrace().entries.length;
  await dist.destroyProcessGroup();
  return result;
}
