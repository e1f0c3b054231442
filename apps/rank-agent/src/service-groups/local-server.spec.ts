// The local path between a member (LocalLink) and its agent's worker (LocalServer), both ends real:
// a Unix socket and a memfd segment mapped through /proc (here both in this process). Each end
// proves the group's secret to the other before any op.
import { existsSync } from 'fs';
import { connect, createServer } from 'net';
import { tmpdir } from 'os';
import { join } from 'path';
import { LocalLink, readFrames, writeFrame } from '@cmesh/client';
import { serviceGroupKeys, type ServiceGroupOp, type ServiceGroupResult } from '@cmesh/protocol';
import { LocalServer, localSocketPath, removeLocalSocket } from './local-server';

const KEY = serviceGroupKeys(Buffer.alloc(32, 1)).local;
const OTHER = serviceGroupKeys(Buffer.alloc(32, 2)).local;

const op = (seq: number, bytes: number): ServiceGroupOp => ({ seq, op: 'allReduce', dtype: 'uint8', count: bytes, timeoutMs: 1000, bytes });

describe('LocalServer and LocalLink', () => {
  let server: LocalServer;
  const ops: { op: ServiceGroupOp; data: Uint8Array }[] = [];
  let gone = 0;

  beforeEach(async () => {
    ops.length = 0;
    gone = 0;
    server = new LocalServer(
      'member-1',
      KEY,
      1 << 30,
      (o, data) => ops.push({ op: o, data }),
      () => gone++,
    );
    await server.listen();
  });

  afterEach(() => {
    server.close();
    expect(existsSync(localSocketPath(process.pid))).toBe(false);
  });

  /** The member's side, with no op or close handlers. */
  const openLink = (path: string, member: string, key: Uint8Array) =>
    LocalLink.open(
      path,
      member,
      key,
      5000,
      () => undefined,
      () => undefined,
    );

  const until = async (what: string, ok: () => boolean) => {
    const deadline = Date.now() + 5000;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`${what} did not happen within 5 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };

  it('refuses a member other than the one placed there, which stays on NATS', async () => {
    const opened = await openLink(server.path, 'someone-else', KEY);
    expect(opened).toEqual({ why: 'not the member placed here' });
    expect(server.connected).toBe(false);
  });

  it('a member without the group secret is refused before its segment is mapped', async () => {
    const opened = await openLink(server.path, 'member-1', OTHER);
    // the member sees first that the agent's proof does not hold under its key, and stays on NATS
    expect(opened).toEqual({ why: 'the socket did not prove the group secret' });
    expect(server.connected).toBe(false);
    // a stranger that answers the challenge with a made-up proof is refused too
    const refused = await new Promise<unknown[]>((resolve) => {
      const frames: unknown[] = [];
      const sock = connect(server.path);
      readFrames(sock, (f) => {
        frames.push(f);
        if ((f as { type: string }).type === 'challenge') writeFrame(sock, { type: 'proof', proof: 'ab'.repeat(32), pid: process.pid, fd: 0, bytes: 4096 });
      });
      sock.on('error', () => undefined).once('close', () => resolve(frames));
      writeFrame(sock, { type: 'hello', member: 'member-1', nonce: 'n' });
    });
    expect(refused.map((f) => (f as { type: string }).type)).toEqual(['challenge', 'refused']);
    expect(refused[1]).toEqual({ type: 'refused', message: 'the member did not prove the group secret' });
    expect(server.connected).toBe(false);
  });

  it('a member does not use a socket that cannot prove the group secret (a stranger listening)', async () => {
    const path = join(tmpdir(), `cmesh-svc-stranger-${process.pid}.sock`);
    const got: unknown[] = [];
    const stranger = createServer((s) => {
      s.on('error', () => undefined);
      readFrames(s, (f) => {
        got.push(f);
        // the stranger cannot compute the agent's proof: it sends one of its own making
        if ((f as { type: string }).type === 'hello') writeFrame(s, { type: 'challenge', nonce: 'x', proof: 'cd'.repeat(32) });
      });
    });
    await new Promise<void>((r) => stranger.listen(path, r));
    try {
      const opened = await openLink(path, 'member-1', KEY);
      expect(opened).toEqual({ why: 'the socket did not prove the group secret' });
      // the stranger saw the hello only: no proof, no segment
      expect(got.map((f) => (f as { type: string }).type)).toEqual(['hello']);
    } finally {
      stranger.close();
    }
  });

  it('carries ops and results through the shared segment, growing it for a larger op', async () => {
    const results: ServiceGroupResult[] = [];
    const opened = await LocalLink.open(
      server.path,
      'member-1',
      KEY,
      5000,
      (r) => results.push(r),
      () => undefined,
    );
    if (!('link' in opened)) throw new Error(`not opened: ${opened.why}`);
    const link = opened.link;
    for (const [seq, bytes] of [
      [1, 1000],
      [2, 300_000], // larger than the first segment: a new one is mapped first
    ]) {
      const data = Uint8Array.from({ length: bytes }, (_, i) => (i * 7 + seq) & 0xff);
      if (!link.fits(bytes)) await link.reserve(bytes);
      link.send(op(seq, bytes), data);
      await until(`op ${seq} at the agent`, () => ops.length === seq);
      const got = ops[seq - 1];
      expect(got.op.seq).toBe(seq);
      expect(Buffer.from(got.data).equals(Buffer.from(data))).toBe(true);
      // the agent answers with other bytes: they are what the member reads back
      const out = got.data.map((b) => 255 - b);
      server.reply({ seq, ok: true, bytes }, out);
      await until(`result ${seq}`, () => results.length === seq);
      expect(results[seq - 1]).toEqual({ seq, ok: true, bytes });
      const back = link.view(bytes)!;
      for (let i = 0; i < bytes; i++) if (back[i] !== 255 - data[i]) throw new Error(`result ${seq} byte ${i} = ${back[i]}, want ${255 - data[i]}`);
    }
    link.close();
    await until('the agent seeing the member go', () => gone === 1);
    expect(server.connected).toBe(false);
  });

  it('takes one member only: a second connection is closed', async () => {
    const first = await openLink(server.path, 'member-1', KEY);
    expect('link' in first).toBe(true);
    const second = await openLink(server.path, 'member-1', KEY);
    expect('why' in second).toBe(true);
    if ('link' in first) first.link.close();
  });

  it('removeLocalSocket takes away the file a killed worker left', () => {
    expect(existsSync(server.path)).toBe(true);
    removeLocalSocket(process.pid);
    expect(existsSync(server.path)).toBe(false);
  });
});
