// The shared-memory pieces in one process: sizes and selection, and a ring pair over two real
// segments (wrap-around, a message larger than the ring streamed through it, flow control).
import { CollectiveMismatchError, InvalidArgumentError } from '../../errors';
import type { CollectiveCall } from '../../backends/backend';
import { signature } from '../../ops/signature';
import { FrameMismatch } from '../peer-connection';
import { FastGroup } from './fast';
import { DEFAULT_SEGMENT_BYTES, FAST_BYTES, FAST_REGION_BYTES, F_CTRL_BYTES, MAX_RING_BYTES, ringBytesFor, segmentBudget, segmentBytes } from './layout';
import { ShmLink } from './link';
import { loadShmAddon } from './native';
import { Segment } from './segment';
import { transportMode } from './select';
import { FAST_SLEEP_US, FAST_SPIN_US, FAST_YIELD_US, fastWaitPolicy } from './shm-transport';

describe('shm sizes and selection', () => {
  it('CMESH_SHM_BYTES: bytes or K/M/G, default 64 MiB; anything else is an InvalidArgumentError', () => {
    expect(segmentBudget(undefined)).toBe(DEFAULT_SEGMENT_BYTES);
    expect(segmentBudget('1048576')).toBe(1 << 20);
    expect(segmentBudget('16M')).toBe(16 << 20);
    expect(segmentBudget('2GiB')).toBe(2 * 1024 ** 3);
    expect(() => segmentBudget('lots')).toThrow(InvalidArgumentError);
  });

  it('rings: powers of two within the budget, at most 4 MiB, none below 64 KiB', () => {
    expect(ringBytesFor(1, DEFAULT_SEGMENT_BYTES)).toBe(MAX_RING_BYTES);
    expect(ringBytesFor(63, DEFAULT_SEGMENT_BYTES)).toBe(1024 * 1024);
    expect(segmentBytes(63, ringBytesFor(63, DEFAULT_SEGMENT_BYTES))).toBeLessThanOrEqual(DEFAULT_SEGMENT_BYTES);
    expect(ringBytesFor(3, 100 * 1024)).toBe(0);
  });

  it('CMESH_TRANSPORT and the option: auto by default, the option wins, unknown names are errors', () => {
    expect(transportMode(undefined, {})).toBe('auto');
    expect(transportMode(undefined, { CMESH_TRANSPORT: 'SHM' })).toBe('shm');
    expect(transportMode('auto', { CMESH_TRANSPORT: 'tcp' })).toBe('auto');
    expect(() => transportMode('udp', {})).toThrow('initProcessGroup: transport must be one of auto, tcp, shm, got "udp"');
  });
});

(process.platform === 'linux' ? describe : describe.skip)('a ring pair over two segments', () => {
  const RING = 64 * 1024;
  function pair() {
    const addon = loadShmAddon();
    const a = new Segment(addon, addon.createSegment(segmentBytes(1, RING)).buffer);
    const b = new Segment(addon, addon.createSegment(segmentBytes(1, RING)).buffer);
    // rank 0 owns a, rank 1 owns b; each has one slot (the other rank)
    const l0 = new ShmLink(1, a, 0, RING, b, 0, RING);
    const l1 = new ShmLink(0, b, 0, RING, a, 0, RING);
    return { l0, l1 };
  }

  it('carries frames in order across wrap-around, a frame larger than the ring in pieces', async () => {
    const { l0, l1 } = pair();
    const got: Buffer[] = [];
    l1.attach((chunk) => got.push(Buffer.from(chunk)));
    const big = Buffer.alloc(RING * 3 + 123).map((_, i) => (i * 7) & 0xff);
    const msgs = [Buffer.from('head'), big, Buffer.from('tail')];
    let resolved = 0;
    const writes = msgs.map((m) => l0.write(Buffer.alloc(0), m).then(() => resolved++));
    // the ring holds RING bytes: the writer waits for the reader, which frees space as it reads
    expect(l0.pendingWrites).toBe(2);
    for (let i = 0; i < 20 && l0.pendingWrites; i++) {
      l1.poll();
      l0.flush();
    }
    l1.poll();
    await Promise.all(writes);
    expect(resolved).toBe(3);
    expect(Buffer.concat(got).equals(Buffer.concat(msgs))).toBe(true);
  });

  it('close fails the queued writes and every later one', async () => {
    const { l0 } = pair();
    const w = l0.write(Buffer.alloc(0), Buffer.alloc(RING * 2));
    l0.close(new Error('gone'));
    await expect(w).rejects.toThrow('gone');
    await expect(l0.write(Buffer.alloc(0), Buffer.alloc(1))).rejects.toThrow('gone');
  });
});

describe('how long a small collective waits inside the call', () => {
  it('spins then sleeps when every rank has a core; yields the core then sleeps when they share cores; not at all with CMESH_SPIN_US=0 or peers in this process', () => {
    expect(fastWaitPolicy(2, false, {}, 2)).toEqual({ spinUs: FAST_SPIN_US, sleepUs: FAST_SLEEP_US, yieldUs: 0 });
    expect(fastWaitPolicy(4, false, {}, 2)).toEqual({ spinUs: 0, sleepUs: FAST_SLEEP_US, yieldUs: FAST_YIELD_US });
    expect(fastWaitPolicy(4, false, { CMESH_SPIN_US: '30' }, 2)).toEqual({ spinUs: 0, sleepUs: FAST_SLEEP_US, yieldUs: 30 });
    expect(fastWaitPolicy(2, false, { CMESH_SPIN_US: '20' }, 2)).toEqual({ spinUs: 20, sleepUs: FAST_SLEEP_US, yieldUs: 0 });
    expect(fastWaitPolicy(2, false, { CMESH_SPIN_US: '0' }, 2)).toEqual({ spinUs: 0, sleepUs: 0, yieldUs: 0 });
    expect(fastWaitPolicy(2, true, {}, 2)).toEqual({ spinUs: 0, sleepUs: 0, yieldUs: 0 });
  });
});

(process.platform === 'linux' ? describe : describe.skip)('small collectives in one step, two ranks in one process', () => {
  function groups() {
    const addon = loadShmAddon();
    const bufs = [0, 1].map(() => addon.createSegment(segmentBytes(1, 64 * 1024)).buffer);
    const at = (b: ArrayBuffer) => b.byteLength - FAST_REGION_BYTES;
    const regions = bufs.map((b) => ({ bytes: Buffer.from(b, at(b), FAST_REGION_BYTES), i32: new Int32Array(b, at(b), F_CTRL_BYTES >> 2) }));
    return [0, 1].map(
      (me) =>
        new FastGroup(addon, addon.fastOpen(bufs[me], at(bufs[me]), [[bufs[1 - me], at(bufs[1 - me]), -1]]), regions, me, [0, 1], { spinUs: 0, sleepUs: 0 }),
    );
  }
  const allReduce = (t: Float32Array): CollectiveCall => ({ op: 'allReduce', tensor: t, redOp: 'sum' });

  it('the second rank to post completes inside the call, the first once it polls; both halves, element by element', async () => {
    const [g0, g1] = groups();
    for (let i = 0; i < 50; i++) {
      const n = 1 + ((i * 37) % 4096);
      const a = Float32Array.from({ length: n }, (_, j) => i + j);
      const b = Float32Array.from({ length: n }, (_, j) => 2 * j - i);
      const sig = signature('allReduce', 'float32', n);
      const first = g0.run(allReduce(a), i, sig);
      expect(first.ok).toBe(false);
      const second = g1.run(allReduce(b), i, sig);
      expect(second.ok).toBe(true);
      g0.poll();
      await Promise.all([first.done, second.done]);
      const want = Float32Array.from({ length: n }, (_, j) => 3 * j);
      expect(Buffer.from(a.buffer).equals(Buffer.from(want.buffer))).toBe(true);
      expect(Buffer.from(b.buffer).equals(Buffer.from(want.buffer))).toBe(true);
    }
  });

  it('ops issued before the previous one completed wait their turn, in order', async () => {
    const [g0, g1] = groups();
    const sig = signature('allReduce', 'float32', 4);
    const mine = [1, 2, 3].map((v) => new Float32Array(4).fill(v));
    const ops0 = mine.map((t, i) => g0.run(allReduce(t), i, sig));
    const theirs = [10, 20, 30].map((v) => new Float32Array(4).fill(v));
    const ops1 = theirs.map((t, i) => g1.run(allReduce(t), i, sig));
    for (let i = 0; i < 5; i++) {
      g0.poll();
      g1.poll();
    }
    await Promise.all([...ops0, ...ops1].map((o) => o.done));
    expect([...mine, ...theirs].map((t) => t[0])).toEqual([11, 22, 33, 11, 22, 33]);
  });

  /** Polls both sides until `ops` settle (each poll moves a side on by the pieces its peer has posted). */
  async function drive(gs: FastGroup[], ops: { settled: boolean; done: Promise<void> }[]): Promise<void> {
    for (let i = 0; i < 10_000 && ops.some((o) => !o.settled); i++) for (const g of gs) g.poll();
    await Promise.all(ops.map((o) => o.done));
  }

  it('a part larger than a half goes in pieces: every collective, gather and scatter too, element by element, sizes that end mid-piece', async () => {
    const [g0, g1] = groups();
    const n = Math.floor((FAST_BYTES / 4) * 2.5) + 3; // three pieces of float32, the last partial
    const input = (r: number) => Float32Array.from({ length: n }, (_, j) => (r + 1) * 1000 + (j % 9973));
    let seq = 0;
    // allReduce
    const a = [0, 1].map(input);
    const sigAr = signature('allReduce', 'float32', n);
    const ar = [g0, g1].map((g, r) => g.run(allReduce(a[r]), seq, sigAr));
    await drive([g0, g1], ar);
    const sum = Float32Array.from({ length: n }, (_, j) => 3000 + 2 * (j % 9973));
    for (const t of a) expect(Buffer.from(t.buffer).equals(Buffer.from(sum.buffer))).toBe(true);
    // broadcast from rank 1
    const b = [new Float32Array(n), input(1)];
    const sigB = signature('broadcast', 'float32', n, 1);
    await drive(
      [g0, g1],
      [g0, g1].map((g, r) => g.run({ op: 'broadcast', tensor: b[r], root: 1 }, ++seq, sigB)),
    );
    expect(Buffer.from(b[0].buffer).equals(Buffer.from(input(1).buffer))).toBe(true);
    // allGather
    const outs = [0, 1].map(() => [new Float32Array(n), new Float32Array(n)]);
    const sigG = signature('allGather', 'float32', n);
    await drive(
      [g0, g1],
      [g0, g1].map((g, r) => g.run({ op: 'allGather', input: input(r), outputs: outs[r] }, ++seq, sigG)),
    );
    for (const o of outs) for (const r of [0, 1]) expect(Buffer.from(o[r].buffer).equals(Buffer.from(input(r).buffer))).toBe(true);
    // gather to rank 0, scatter from rank 1
    const got = [new Float32Array(n), new Float32Array(n)];
    const sigGa = signature('gather', 'float32', n, 0);
    await drive(
      [g0, g1],
      [g0, g1].map((g, r) => g.run({ op: 'gather', input: input(r), outputs: r === 0 ? got : undefined, root: 0 }, ++seq, sigGa)),
    );
    for (const r of [0, 1]) expect(Buffer.from(got[r].buffer).equals(Buffer.from(input(r).buffer))).toBe(true);
    const parts = [new Float32Array(n), new Float32Array(n)];
    const sigSc = signature('scatter', 'float32', n, 1);
    await drive(
      [g0, g1],
      [g0, g1].map((g, r) => g.run({ op: 'scatter', output: parts[r], inputs: r === 1 ? [input(5), input(6)] : undefined, root: 1 }, ++seq, sigSc)),
    );
    for (const r of [0, 1]) expect(Buffer.from(parts[r].buffer).equals(Buffer.from(input(5 + r).buffer))).toBe(true);
    // reduceScatter of 2n elements: rank r gets block r summed
    const flat = (r: number) => Float32Array.from({ length: 2 * n }, (_, j) => r * 7 + j);
    const rs = [new Float32Array(n), new Float32Array(n)];
    const sigRs = signature('reduceScatter', 'float32', n);
    await drive(
      [g0, g1],
      [g0, g1].map((g, r) => g.run({ op: 'reduceScatter', input: flat(r), output: rs[r], redOp: 'sum' }, ++seq, sigRs)),
    );
    for (const r of [0, 1]) {
      const want = Float32Array.from({ length: n }, (_, j) => 7 + 2 * (r * n + j));
      expect(Buffer.from(rs[r].buffer).equals(Buffer.from(want.buffer))).toBe(true);
    }
  });

  it('a piece-wise op that fails on one rank posts the rest of its numbers: the peer fails that op, and the next ops are right', async () => {
    const [g0, g1] = groups();
    const n = (FAST_BYTES / 4) * 3;
    const sig = signature('allReduce', 'float32', n);
    const lonely = g0.run(allReduce(new Float32Array(n).fill(1)), 0, sig);
    expect(lonely.settled).toBe(false);
    g0.cancel(lonely); // its timeout, say
    const late = g1.run(allReduce(new Float32Array(n).fill(2)), 0, sig);
    await drive([g0, g1], [late]).catch(() => undefined);
    await expect(late.done).rejects.toThrow(/rank 0/);
    for (let i = 1; i <= 3; i++) {
      const t = [new Float32Array(n).fill(i), new Float32Array(n).fill(10 * i)];
      const ops = [g0, g1].map((g, r) => g.run(allReduce(t[r]), i, sig));
      await drive([g0, g1], ops);
      for (const x of t) expect([x[0], x[n - 1]]).toEqual([11 * i, 11 * i]);
    }
  });

  it("a rooted op waits only for what it reads: a broadcast's root and a gather's non-root complete inside the call alone; the next op waits at the gate", async () => {
    const [g0, g1] = groups();
    const n = 5;
    const data = Float32Array.from({ length: n }, (_, j) => j + 0.5);
    const sigB = signature('broadcast', 'float32', n, 0);
    // the root has nobody to wait for: done before its peer calls
    const root = g0.run({ op: 'broadcast', tensor: data, root: 0 }, 0, sigB);
    expect(root.ok).toBe(true);
    // its next op may not post over the half the peer has not read: held at the gate
    const sigGa = signature('gather', 'float32', n, 1);
    const mine = new Float32Array(n).fill(7);
    const gather0 = g0.run({ op: 'gather', input: mine, outputs: undefined, root: 1 }, 1, sigGa);
    expect([gather0.posted, gather0.ok]).toEqual([false, false]);
    expect(g0.awaited(gather0)).toEqual([1]);
    data.fill(-1); // the root's tensor is its own again: the data went into its half
    const got = new Float32Array(n);
    const recv = g1.run({ op: 'broadcast', tensor: got, root: 0 }, 0, sigB);
    expect(recv.ok).toBe(true);
    expect(Array.from(got)).toEqual([0.5, 1.5, 2.5, 3.5, 4.5]);
    // rank 1 posted: rank 0's gather goes on when it polls, and completes alone (a non-root)
    g0.poll();
    expect(gather0.ok).toBe(true);
    const outs = [new Float32Array(n), new Float32Array(n)];
    const gather1 = g1.run({ op: 'gather', input: new Float32Array(n).fill(3), outputs: outs, root: 1 }, 1, sigGa);
    expect(gather1.ok).toBe(true);
    mine.fill(0);
    expect(outs.map((o) => Array.from(o))).toEqual([Array(n).fill(7), Array(n).fill(3)]);
  });

  it('a mismatch no rank read in the op (a broadcast root, a reduce non-root) fails the next op on both, naming both calls', async () => {
    const [g0, g1] = groups();
    const b = g0.run({ op: 'broadcast', tensor: new Float32Array(4), root: 0 }, 0, signature('broadcast', 'float32', 4, 0));
    const r = g1.run({ op: 'reduce', tensor: new Float32Array(4), root: 0, redOp: 'sum' }, 0, signature('reduce', 'float32', 4, 0));
    // neither reads the other's post: both are done, as with eager sends
    expect([b.ok, r.ok]).toEqual([true, true]);
    const sig = signature('allReduce', 'float32', 4);
    const next = [g0, g1].map((g) => g.run(allReduce(new Float32Array(4)), 1, sig));
    await drive([g0, g1], next).catch(() => undefined);
    for (const [i, op] of next.entries()) {
      await expect(op.done).rejects.toBeInstanceOf(CollectiveMismatchError);
      await expect(op.done).rejects.toMatchObject({ context: { peers: [1 - i] } });
      await expect(op.done).rejects.toThrow(
        /op before this one: rank \d called (broadcast|reduce)\(float32, count=4, root=0\) but rank \d called (reduce|broadcast)/,
      );
    }
  });

  it('a different call on the peer is a FrameMismatch naming it', async () => {
    const [g0, g1] = groups();
    g0.run(allReduce(new Float32Array(4)), 0, signature('allReduce', 'float32', 4));
    const op = g1.run({ op: 'broadcast', tensor: new Float32Array(4), root: 0 }, 0, signature('broadcast', 'float32', 4, 0));
    await expect(op.done).rejects.toBeInstanceOf(FrameMismatch);
    await expect(op.done).rejects.toMatchObject({ peer: 0 });
  });
});
