// Failures that must not hang: a rank that dies mid-all-reduce, a rank that never calls (timeout),
// ranks calling different collectives (mismatch, mismatch3: seen by a third rank through an
// abort), a send whose size is not the recv's (p2pSize), an any-source recv in a group whose
// only other member dies while a rank outside the group lives on (anyDead), and a broadcast root
// that leaves before the others call (rootLeaves).
import * as dist from '../../../src';

export async function run(args: {
  mode: 'kill' | 'timeout' | 'mismatch' | 'mismatch3' | 'p2pSize' | 'anyDead' | 'rootLeaves';
}): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ timeout: 30000 });
  const rank = dist.getRank();
  const t = new Float32Array(1 << 18).fill(1);
  const started = Date.now();
  const report = (err: dist.CmeshError) => ({ name: err.name, message: err.message, context: err.context, afterMs: Date.now() - started });
  try {
    if (args.mode === 'kill') {
      for (let i = 0; i < 200; i++) {
        if (rank === 2 && i === 3) process.kill(process.pid, 'SIGKILL');
        await dist.allReduce(t);
      }
    } else if (args.mode === 'timeout') {
      // Ranks stay up well past the 1 s timeout, so that no rank's exit (a peer failure) can reach
      // another before its own timeout does, however late a loaded machine schedules it.
      if (rank === 1) await new Promise((r) => setTimeout(r, 6000));
      else {
        const failed = await dist.allReduce(t, { timeout: 1000 }).then(
          () => null,
          (e: dist.CmeshError) => report(e),
        );
        await new Promise((r) => setTimeout(r, 4000));
        if (failed) return failed;
      }
    } else if (args.mode === 'mismatch3') {
      await dist.allReduce(new Float32Array(rank === 2 ? 3 : 2));
    } else if (args.mode === 'rootLeaves') {
      // the root's broadcast is done once its data is sent; it leaves before the others call:
      // their broadcast gets its data, and their next op fails naming it
      const b = new Float32Array(4096).map((_, i) => (rank === 0 ? i * 0.5 : -1));
      if (rank !== 0) await new Promise((r) => setTimeout(r, 1000));
      await dist.broadcast(b, { src: 0 });
      const wrong = b.filter((v, i) => v !== i * 0.5).length;
      if (rank === 0) {
        await dist.destroyProcessGroup();
        return { ok: true, wrong };
      }
      const after = await dist.allReduce(b).then(
        () => null,
        (e: dist.CmeshError) => ({ name: e.name, peers: e.context.peers }),
      );
      return { ok: true, wrong, after };
    } else if (args.mode === 'p2pSize') {
      if (rank === 0) await dist.recv(new Float32Array(2), { src: 1 });
      else await dist.send(new Float32Array(1), { dst: 0 });
    } else if (args.mode === 'anyDead') {
      const g = await dist.newGroup([0, 1]);
      if (rank === 1) process.kill(process.pid, 'SIGKILL');
      if (rank === 0) await dist.recv(new Float32Array(1), { group: g });
      else await new Promise((r) => setTimeout(r, 8000)); // rank 2 lives on, outside the group
    } else {
      if (rank === 0) await dist.broadcast(t, { src: 0 });
      else await dist.allReduce(t);
    }
    return { ok: true };
  } catch (e) {
    return report(e as dist.CmeshError);
  }
}
