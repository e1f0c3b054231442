// Point-to-point (blocking, non-blocking, any-source, tags), async Work, and newGroup with
// non-members, at world size 4.
import * as dist from '../../../src';

export async function run(): Promise<Record<string, unknown>> {
  await dist.initProcessGroup({ timeout: 20000 });
  const rank = dist.getRank();
  const out: Record<string, unknown> = {};

  // blocking ring of sends: rank r sends r*10 to r+1
  const P = dist.getWorldSize();
  const got = new Int32Array(2);
  const sending = dist.isend(new Int32Array([rank * 10, rank]), { dst: (rank + 1) % P });
  out.ringFrom = await dist.recv(got, { src: (rank + P - 1) % P });
  await sending.wait();
  out.ring = Array.from(got);

  // tags keep messages apart even when sent in the opposite order
  if (rank === 0) {
    await dist.send(new Float32Array([1]), { dst: 1, tag: 7 });
    await dist.send(new Float32Array([2]), { dst: 1, tag: 3 });
  } else if (rank === 1) {
    const a = new Float32Array(1);
    const b = new Float32Array(1);
    await dist.recv(a, { src: 0, tag: 3 });
    await dist.recv(b, { src: 0, tag: 7 });
    out.tags = [a[0], b[0]];
  }

  // any-source: rank 0 receives from 1, 2, 3 in whatever order they come
  if (rank === 0) {
    const senders: number[] = [];
    for (let i = 1; i < P; i++) {
      const t = new Float64Array(1);
      const from = await dist.recv(t, { tag: 5 });
      if (t[0] !== from * 1.5) senders.push(-1);
      senders.push(from);
    }
    out.anySource = senders.sort();
  } else {
    await dist.send(new Float64Array([rank * 1.5]), { dst: 0, tag: 5 });
  }

  // irecv + Work
  if (rank === 2) {
    const t = new Uint8Array(3);
    const w = dist.irecv(t, { src: 3 });
    out.irecvCompletedEarly = w.isCompleted();
    await w.wait();
    out.irecv = { data: Array.from(t), from: w.result(), completed: w.isCompleted(), exception: w.exception() ?? null };
  } else if (rank === 3) {
    await dist.isend(new Uint8Array([9, 8, 7]), { dst: 2 }).wait();
  }

  // async collectives in flight together
  const a = new Float32Array(4).fill(rank);
  const b = new Int32Array(2).fill(rank + 1);
  const w1 = dist.allReduce(a, { asyncOp: true });
  const w2 = dist.allReduce(b, { asyncOp: true, op: dist.ReduceOp.MAX });
  await Promise.all([w1.wait(), w2.wait()]);
  out.async = [Array.from(a), Array.from(b)];

  // groups: [0, 2] and [1, 2, 3]; non-members get -1 and no-op collectives
  const g02 = await dist.newGroup([2, 0]);
  const g123 = await dist.newGroup([1, 2, 3]);
  out.groupRanks = [dist.getRank(g02), dist.getWorldSize(g02), dist.getRank(g123), dist.getWorldSize(g123)];
  const x = new Float32Array([rank + 1]);
  await dist.allReduce(x, { group: g02 });
  const y = new Float32Array([rank + 1]);
  await dist.allReduce(y, { group: g123, op: dist.ReduceOp.PRODUCT });
  const z = new Float32Array([rank === 2 ? 42 : 0]);
  await dist.broadcast(z, { group: g123, src: 2 });
  out.groupResults = [x[0], y[0], z[0]];
  await dist.barrier();
  await dist.destroyProcessGroup();
  return out;
}
