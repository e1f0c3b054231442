// The shared-memory pieces in one process: sizes and selection, and a ring pair over two real
// segments (wrap-around, a message larger than the ring streamed through it, flow control).
import { InvalidArgumentError } from '../../errors';
import { DEFAULT_SEGMENT_BYTES, MAX_RING_BYTES, ringBytesFor, segmentBudget, segmentBytes } from './layout';
import { ShmLink } from './link';
import { loadShmAddon } from './native';
import { Segment } from './segment';
import { transportMode } from './select';

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
