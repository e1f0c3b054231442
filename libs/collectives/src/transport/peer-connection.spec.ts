// The frame parser of one data-plane connection, fed by hand: what a peer's header can make it
// allocate, how messages nobody waits for are buffered, and what breaks the protocol.
import type * as net from 'net';
import { FrameHeader, FrameKind, HEADER_BYTES, NO_SIGNATURE, writeHeader } from './frame';
import { ConnectionEvents, MAX_CONTROL_BYTES, PeerConnection } from './peer-connection';
import { UnexpectedLimits } from './unexpected-limits';

function header(kind: number, group: number, tag: number, length: number): Buffer {
  const h = writeHeader(Buffer.alloc(HEADER_BYTES), kind, group, tag, NO_SIGNATURE, length);
  h[0] = kind;
  return h;
}

function connection(onControl: ConnectionEvents['onControl'] = () => undefined, limits?: UnexpectedLimits) {
  const controls: Array<[FrameHeader, Buffer]> = [];
  const conn = new PeerConnection(
    1,
    {
      onControl: (p, h, payload) => {
        controls.push([h, Buffer.from(payload)]);
        return onControl(p, h, payload);
      },
      takeAnySource: () => undefined,
      onUnexpectedP2P: () => {},
    },
    undefined,
    limits,
  );
  let destroyed = 0;
  conn.attach({ setNoDelay: () => {}, destroy: () => void destroyed++ } as unknown as net.Socket);
  return { conn, controls, destroyed: () => destroyed };
}

describe('PeerConnection', () => {
  it('a header announcing 4 GiB allocates 64 KiB; the buffer grows with what arrives and holds it all', () => {
    const { conn } = connection();
    conn.feed(header(FrameKind.P2P, 3, 4, 0xffffffff));
    const u = conn.unexpected.get('2:3:4')![0];
    expect(u.data.length).toBe(64 * 1024);
    const { conn: c2 } = connection();
    const payload = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    c2.feed(header(FrameKind.P2P, 3, 4, payload.length));
    for (let off = 0; off < payload.length; off += 7000) c2.feed(payload.subarray(off, off + 7000));
    const got = c2.takeUnexpected('2:3:4')!;
    expect(got.data.length).toBe(payload.length);
    expect(got.data.equals(payload)).toBe(true);
  });

  it('a message of another length than the posted receive is skipped, then rejects it; the next frame parses', async () => {
    const { conn } = connection();
    const into = new Uint8Array(16);
    const done = new Promise<number>((resolve, reject) => conn.post('1:1:1', { into, sig: NO_SIGNATURE, resolve, reject }));
    conn.feed(header(FrameKind.Collective, 1, 1, 1 << 20));
    for (let i = 0; i < 16; i++) conn.feed(Buffer.alloc(1 << 16));
    await expect(done).rejects.toThrow('frame mismatch');
    conn.feed(Buffer.concat([header(FrameKind.P2P, 2, 2, 3), Buffer.from([1, 2, 3])]));
    expect(conn.unexpected.size).toBe(1);
    expect([...conn.takeUnexpected('2:2:2')!.data]).toEqual([1, 2, 3]);
  }, 10_000);

  it.each([
    ['an unknown kind', header(9, 0, 0, 0), /unknown kind 9/],
    ['a bye with a payload', header(FrameKind.Bye, 0, 0, 1), /bye frame of 1 bytes/],
    ['an abort over the limit', header(FrameKind.Abort, 0, 0, MAX_CONTROL_BYTES + 1), /abort frame of 65537 bytes/],
  ])('%s breaks the protocol: the connection is closed, nothing more is read', (_what, bytes, why) => {
    const { conn, controls, destroyed } = connection();
    conn.feed(Buffer.concat([bytes, header(FrameKind.Bye, 0, 0, 0)]));
    expect(conn.protocolError).toMatch(why);
    expect(destroyed()).toBe(1);
    expect(controls).toEqual([]);
  });

  it('an abort its owner cannot read breaks the protocol', () => {
    const { conn } = connection(() => 'not a notice');
    const payload = Buffer.from('nope');
    conn.feed(Buffer.concat([header(FrameKind.Abort, 1, 1, payload.length), payload]));
    expect(conn.protocolError).toBe('not a notice');
  });

  it('messages nobody asked for: past the count limit the connection breaks, naming the limit; claimed ones stop counting', () => {
    const { conn, destroyed } = connection(undefined, { frames: 3, bytes: 1 << 20 });
    for (const tag of [1, 2, 3]) conn.feed(header(FrameKind.P2P, 0, tag, 0));
    expect(conn.unexpectedFrames).toBe(3);
    // one is claimed by a receive: room for one more
    conn.post('2:0:1', { into: new Uint8Array(0), sig: NO_SIGNATURE, resolve: () => {}, reject: () => {} });
    expect(conn.takeUnexpected('2:0:2')).toBeDefined();
    expect(conn.unexpectedFrames).toBe(1);
    conn.feed(Buffer.concat([header(FrameKind.P2P, 0, 4, 0), header(FrameKind.P2P, 0, 5, 0)]));
    expect(conn.protocolError).toBeUndefined();
    conn.feed(header(FrameKind.P2P, 0, 6, 0));
    expect(conn.protocolError).toBe('sent more than 3 messages nobody had asked for yet (CMESH_MAX_UNEXPECTED_FRAMES)');
    expect(destroyed()).toBe(1);
  });

  it('messages nobody asked for: their declared bytes count, a header past the limit breaks the connection before anything is allocated', () => {
    const { conn } = connection(undefined, { frames: 100, bytes: 1000 });
    conn.feed(Buffer.concat([header(FrameKind.Collective, 0, 1, 600), Buffer.alloc(600, 7)]));
    expect(conn.unexpectedBytes).toBe(600);
    // a message still arriving when its receive is posted is released once it is complete
    conn.feed(header(FrameKind.Collective, 0, 2, 400));
    let got = -1;
    conn.post('1:0:2', { into: new Uint8Array(400), sig: NO_SIGNATURE, resolve: (from) => (got = from), reject: () => {} });
    expect(conn.unexpectedBytes).toBe(1000);
    conn.feed(Buffer.alloc(400, 1));
    expect(got).toBe(1);
    expect(conn.unexpectedBytes).toBe(600);
    conn.feed(header(FrameKind.Collective, 0, 3, 401));
    expect(conn.protocolError).toBe('sent 1001 bytes nobody had asked for yet, more than 1000 (CMESH_MAX_UNEXPECTED_BYTES)');
    expect(conn.unexpected.get('1:0:3')).toBeUndefined();
  });
});
