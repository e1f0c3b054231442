// The TcpStore frame decoder: frames split across reads, what a malformed frame reports (its id,
// the frames before it), and a large frame arriving in many pieces.
import { Cmd, FrameDecoder, MalformedFrameError, encodeFrame, utf8 } from './frame-codec';

describe('store FrameDecoder', () => {
  it('reassembles frames split at every byte', () => {
    const bytes = Buffer.concat([encodeFrame(Cmd.SET, 1, [utf8('k'), utf8('v')]), encodeFrame(Cmd.GET, 2, [utf8('k')])]);
    const d = new FrameDecoder();
    const frames = [...bytes].flatMap((b) => d.push(Buffer.from([b])));
    expect(frames.map((f) => [f.tag, f.id, f.fields.map(String)])).toEqual([
      [Cmd.SET, 1, ['k', 'v']],
      [Cmd.GET, 2, ['k']],
    ]);
  });

  it('borrowed pieces (one read buffer, overwritten after each push) give the same frames, split at any point', () => {
    const frames = [
      encodeFrame(Cmd.SET, 1, [utf8('key'), Buffer.alloc(300, 7)]),
      encodeFrame(Cmd.GET, 2, [utf8('k')]),
      encodeFrame(Cmd.WAIT, 3, [utf8('a'), utf8('b')]),
    ];
    const bytes = Buffer.concat(frames);
    const readBuffer = Buffer.alloc(4096);
    for (const step of [1, 5, 11, 64, 333, bytes.length]) {
      const d = new FrameDecoder();
      const got = [];
      for (let at = 0; at < bytes.length; at += step) {
        const n = bytes.copy(readBuffer, 0, at, Math.min(at + step, bytes.length));
        got.push(...d.push(readBuffer.subarray(0, n), true));
        readBuffer.fill(0xee); // the next read overwrites it
      }
      expect(got.map((f) => encodeFrame(f.tag, f.id, f.fields))).toEqual(frames);
    }
  });

  it('a malformed frame throws with its id and the complete frames before it', () => {
    const bad = encodeFrame(Cmd.GET, 7, [utf8('key')]);
    bad.writeUInt32LE(1000, 11); // the field's length runs past the frame
    const d = new FrameDecoder();
    let err: unknown;
    try {
      d.push(Buffer.concat([encodeFrame(Cmd.NUM_KEYS, 6), bad]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MalformedFrameError);
    expect((err as MalformedFrameError).id).toBe(7);
    expect((err as MalformedFrameError).frames.map((f) => f.id)).toEqual([6]);
    expect((err as Error).message).toMatch(/field 0 of 1000 bytes overruns the frame/);
  });

  it.each([
    [3, /length 3 is shorter than a header/],
    [2 ** 31, /over the limit/],
  ])('a length of %d is refused', (len, why) => {
    const b = Buffer.alloc(11);
    b.writeUInt32LE(len, 0);
    expect(() => new FrameDecoder().push(b)).toThrow(why);
  });

  it('bytes after the last field are refused', () => {
    const f = Buffer.concat([encodeFrame(Cmd.NUM_KEYS, 1), Buffer.from([0])]);
    f.writeUInt32LE(f.length - 4, 0);
    expect(() => new FrameDecoder().push(f)).toThrow(/1 bytes after the last field/);
  });

  it('a 64 MiB frame in 64 KiB pieces decodes in well under a second (copied once)', () => {
    const value = Buffer.alloc(64 << 20, 3);
    const frame = encodeFrame(Cmd.SET, 9, [utf8('big'), value]);
    const d = new FrameDecoder();
    const t0 = Date.now();
    const frames = [];
    for (let off = 0; off < frame.length; off += 1 << 16) frames.push(...d.push(frame.subarray(off, off + (1 << 16))));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(frames).toHaveLength(1);
    expect(frames[0].fields[1].equals(value)).toBe(true);
  });

  it('with skipOversize, a frame over the limit comes out with its length and no fields, its body dropped across pieces', () => {
    const big = encodeFrame(Cmd.SET, 9, [utf8('k'), Buffer.alloc(5000, 1)]);
    const bytes = Buffer.concat([encodeFrame(Cmd.GET, 8, [utf8('a')]), big, encodeFrame(Cmd.GET, 10, [utf8('b')])]);
    const d = new FrameDecoder(1024, true);
    const frames = [];
    for (let at = 0; at < bytes.length; at += 7) frames.push(...d.push(bytes.subarray(at, at + 7)));
    expect(frames.map((f) => [f.id, f.oversize, f.fields.map(String)])).toEqual([
      [8, undefined, ['a']],
      [9, big.length - 4, []],
      [10, undefined, ['b']],
    ]);
    // without it, the same frame is malformed
    expect(() => new FrameDecoder(1024).push(big)).toThrow(MalformedFrameError);
  });
});
