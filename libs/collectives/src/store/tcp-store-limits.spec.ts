// The TcpStore server's limits, against real sockets: a client that asks for more than allowed
// gets StoreLimitError naming the limit, nothing changes, and the server (that client included)
// still serves correctly. A set is not answered: its refusal fails the client's next operation.
import * as net from 'net';
import { InvalidArgumentError, StoreLimitError } from '../errors';
import { Cmd, FrameDecoder, REPLY_ERROR, encodeFrame } from './frame-codec';
import { TcpStore } from './tcp-store';
import { TcpStoreLimits, TcpStoreServer, startTcpStoreServer } from './tcp-store-server';

const SECRET = 'bounds-spec-secret-0123456789';
const servers: TcpStoreServer[] = [];
const clients: TcpStore[] = [];

async function serve(limits: Partial<TcpStoreLimits>, secret?: string): Promise<TcpStoreServer> {
  const s = await startTcpStoreServer({ port: 0, limits, secret });
  servers.push(s);
  return s;
}

async function client(server: TcpStoreServer, secret?: string): Promise<TcpStore> {
  const c = await TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 10_000, secret });
  clients.push(c);
  return c;
}

async function refusal(p: Promise<unknown>): Promise<StoreLimitError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(StoreLimitError);
  expect((e as StoreLimitError).code).toBe('STORE_LIMIT');
  return e as StoreLimitError;
}

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of servers.splice(0)) await s.close();
});

describe('TcpStore server limits', () => {
  it('refuses bad limits', () => {
    expect(() => new TcpStoreServer(undefined, { maxKeys: 0 })).toThrow(InvalidArgumentError);
    expect(() => new TcpStoreServer(undefined, { maxBytes: 1.5 })).toThrow('TcpStore limits: maxBytes must be a positive integer, got 1.5');
  });

  it('a request over maxFrameBytes is refused and skipped unread; the connection goes on', async () => {
    const server = await serve({ maxFrameBytes: 64 * 1024 });
    const c = await client(server);
    const other = await client(server);
    await c.set('k', 'old');
    await c.set('k', Buffer.alloc(200 * 1024, 1));
    const e = await refusal(c.numKeys());
    expect(e.message).toMatch(/^TcpStore: set of key "k" refused: a request of \d+ bytes is over the store's limit \(maxFrameBytes 65536\)$/);
    expect((await c.get('k')).toString()).toBe('old');
    await c.set('k2', Buffer.alloc(60 * 1024, 2));
    expect((await other.get('k2')).equals(Buffer.alloc(60 * 1024, 2))).toBe(true);
    expect(server.usage().connections).toBe(2);
  });

  it('an oversize frame sent in pieces is dropped as it arrives: the server holds none of it', async () => {
    const server = await serve({ maxFrameBytes: 1024 });
    const sock = net.connect({ host: '127.0.0.1', port: server.port });
    await new Promise((r) => sock.once('connect', r));
    const decoder = new FrameDecoder();
    const replies: { id: number; tag: number; text: string }[] = [];
    sock.on('data', (d) => replies.push(...decoder.push(d).map((f) => ({ id: f.id, tag: f.tag, text: f.fields[0]?.toString() ?? '' }))));
    const big = encodeFrame(Cmd.SET, 7, [Buffer.from('big'), Buffer.alloc(1 << 20, 9)]);
    for (let at = 0; at < big.length; at += 100_000) sock.write(big.subarray(at, at + 100_000));
    sock.write(encodeFrame(Cmd.NUM_KEYS, 8, []));
    const deadline = Date.now() + 5000;
    while (replies.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    sock.destroy();
    expect(replies.map((r) => [r.id, r.tag])).toEqual([
      [7, REPLY_ERROR],
      [8, 0x80],
    ]);
    expect(replies[0].text).toBe(`a request of ${big.length - 4} bytes is over the store's limit (maxFrameBytes 1024)`);
    expect(server.usage()).toMatchObject({ keys: 0, bytes: 0 });
  });

  it('maxKeys: a new key past it is refused (set, add, compareSet); existing keys still change', async () => {
    const server = await serve({ maxKeys: 3 });
    const c = await client(server);
    for (const k of ['a', 'b', 'c']) await c.set(k, k);
    await c.set('d', 'd');
    expect((await refusal(c.check(['d']))).message).toBe('TcpStore: set of key "d" refused: key d not added: the store holds 3 keys, its limit (maxKeys 3)');
    await refusal(c.add('n', 1));
    await refusal(c.compareSet('e', '', 'e'));
    expect(await c.numKeys()).toBe(3);
    expect(await c.check(['d'])).toBe(false);
    await c.set('a', 'A');
    expect(await c.add('b', 0).catch((e: Error) => e.message)).toMatch(/does not hold an integer/);
    await c.deleteKey('c');
    await c.set('d', 'd');
    expect((await c.get('a')).toString()).toBe('A');
    expect(await c.numKeys()).toBe(3);
  });

  it('maxBytes counts keys and values; a write past it is refused and the old value stays', async () => {
    const server = await serve({ maxBytes: 100 });
    const c = await client(server);
    await c.set('k1', Buffer.alloc(40)); // 42
    await c.set('k2', Buffer.alloc(40)); // 84
    await c.set('k3', Buffer.alloc(20));
    const e = await refusal(c.numKeys());
    expect(e.message).toBe(
      'TcpStore: set of key "k3" refused: key k3 not written: the store would hold 106 bytes of keys and values, over its limit (maxBytes 100)',
    );
    await c.set('k1', Buffer.alloc(60));
    await refusal(c.get('k1'));
    expect((await c.get('k1')).length).toBe(40);
    await c.set('k1', Buffer.alloc(10)); // shrinking is fine: 54
    await c.set('k3', Buffer.alloc(40)); // 96
    expect(await c.numKeys()).toBe(3); // answered after the sets before it ran
    expect(server.usage()).toMatchObject({ keys: 3, bytes: 96 });
    await c.deleteKey('k2');
    expect(server.usage()).toMatchObject({ keys: 2, bytes: 54 });
  });

  it('maxConnections: one more is refused with StoreLimitError, with and without a secret', async () => {
    for (const secret of [undefined, SECRET]) {
      const server = await serve({ maxConnections: 2 }, secret);
      const a = await client(server, secret);
      const b = await client(server, secret);
      // with a secret the handshake meets the refusal; without one, the first request does
      const late = TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 5000, secret }).then((c) => {
        clients.push(c);
        return c.numKeys();
      });
      const e = await refusal(late);
      expect(e.message).toBe(
        `TcpStore: the store at 127.0.0.1:${server.port} refused this connection: it has 2 open connections, its limit (maxConnections 2)`,
      );
      await a.set('x', '1');
      expect((await b.get('x')).toString()).toBe('1');
      await a.close();
      // the slot is free again once the server saw the close
      const deadline = Date.now() + 5000;
      while (server.usage().connections > 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const c = await client(server, secret);
      expect((await c.get('x')).toString()).toBe('1');
    }
  });

  it('parked waits: per connection and in all; refused ones park nothing; a closed connection frees its share', async () => {
    const server = await serve({ maxWaitsPerConnection: 3, maxWaits: 5 });
    const a = await client(server);
    const b = await client(server);
    const setter = await client(server);
    const got = ['w1', 'w2'].map((k) => a.get(k));
    const waited = a.wait(['w3']);
    expect((await refusal(a.get('w4'))).message).toBe('TcpStore: not parked: this connection already waits for 3 keys, its limit (maxWaitsPerConnection 3)');
    // a wait on keys that exist parks nothing and is answered
    await setter.set('here', '1');
    await a.wait(['here']);
    await refusal(b.wait(['v1', 'v2', 'v3', 'v4']));
    const bGot = [b.get('v1'), b.get('v2')];
    expect((await refusal(b.get('v3'))).message).toBe('TcpStore: not parked: the store already waits for 5 keys, its limit (maxWaits 5)');
    expect(server.usage().waits).toBe(5);
    for (const k of ['w1', 'w2', 'w3', 'v1']) await setter.set(k, k);
    expect((await Promise.all(got)).map(String)).toEqual(['w1', 'w2']);
    await waited;
    expect((await bGot[0]).toString()).toBe('v1');
    expect(server.usage().waits).toBe(1);
    // b closes with v2 still parked: its share is freed
    const pending = bGot[1].catch(() => 'closed');
    await b.close();
    expect(await pending).toBe('closed');
    const deadline = Date.now() + 5000;
    while (server.usage().waits > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(server.usage().waits).toBe(0);
    const again = ['x1', 'x2', 'x3'].map((k) => a.get(k));
    for (const k of ['x1', 'x2', 'x3']) await setter.set(k, k);
    expect((await Promise.all(again)).map(String)).toEqual(['x1', 'x2', 'x3']);
  });

  it('a wait woken by a key deleted again before it was answered parks again, counted once', async () => {
    const server = await serve({ maxWaitsPerConnection: 2 });
    const a = await client(server);
    const s = await client(server);
    const w = a.wait(['p', 'q']);
    await s.set('p', '1');
    await s.deleteKey('p');
    expect(server.usage().waits).toBe(1);
    await s.set('q', '1');
    expect(server.usage().waits).toBe(1); // parked again on p
    await s.set('p', '2');
    await w;
    expect(server.usage().waits).toBe(0);
  });
});
