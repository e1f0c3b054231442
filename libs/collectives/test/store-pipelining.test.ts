// TcpStore's set is sent without waiting for an answer (SET_QUIET), requests are pipelined, and
// the frames of one event-loop turn leave in one write, on the client and on the server. Checked
// against real servers on loopback (one in a process of its own, to be killed): a client sees its
// own sets in its later requests, a refused set fails the client's next operation (or close())
// naming the key, a dead server fails what is pending at once, and older clients that wait for
// a set's answer still get it.
import { spawn } from 'child_process';
import * as net from 'net';
import * as path from 'path';
import { DistTimeoutError, StoreError, StoreLimitError, TcpStore, TcpStoreServer, startTcpStoreServer } from '../src';
import { Cmd, encodeFrame, Frame, FrameDecoder, REPLY_ERROR, REPLY_OK } from '../src/store/frame-codec';

const servers: TcpStoreServer[] = [];
const clients: TcpStore[] = [];

async function serve(limits = {}): Promise<TcpStoreServer> {
  const s = await startTcpStoreServer({ port: 0, limits });
  servers.push(s);
  return s;
}

async function client(port: number, timeoutMs = 20_000): Promise<TcpStore> {
  const c = await TcpStore.create({ host: '127.0.0.1', port, timeoutMs });
  clients.push(c);
  return c;
}

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  for (const s of servers.splice(0)) await s.close();
});

/** A raw connection: sends frames as given and collects the frames (and reads) that come back. */
async function raw(port: number) {
  const sock = net.connect({ host: '127.0.0.1', port });
  await new Promise((r) => sock.once('connect', r));
  const decoder = new FrameDecoder();
  const frames: Frame[] = [];
  sock.on('data', (d) => frames.push(...decoder.push(d)));
  const until = async (n: number, ms = 5000) => {
    const deadline = Date.now() + ms;
    while (frames.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    return frames;
  };
  return { sock, frames, until };
}

describe('TcpStore pipelining', () => {
  it("a client's later get, check and wait see its own sets: 3,000 keys, none awaited before the next", async () => {
    const server = await serve();
    const c = await client(server.port);
    const other = await client(server.port);
    const N = 3000;
    const ops: Promise<unknown>[] = [];
    for (let i = 0; i < N; i++) {
      ops.push(c.set(`k/${i}`, `v${i}`));
      ops.push(c.set(`k/${i}`, `w${i}`)); // overwritten at once: the get must see the second
      ops.push(c.get(`k/${i}`));
      ops.push(c.check([`k/${i}`]));
    }
    ops.push(c.wait(Array.from({ length: N }, (_, i) => `k/${i}`)));
    ops.push(c.numKeys());
    const got = await Promise.all(ops);
    for (let i = 0; i < N; i++) {
      expect(got[4 * i]).toBeUndefined();
      expect(got[4 * i + 1]).toBeUndefined();
      expect((got[4 * i + 2] as Buffer).toString()).toBe(`w${i}`);
      expect(got[4 * i + 3]).toBe(true);
    }
    expect(got[4 * N + 1]).toBe(N);
    // another connection sees every one of them too, once it waits for them
    await other.wait([`k/${N - 1}`]);
    const all = await Promise.all(Array.from({ length: N }, (_, i) => other.get(`k/${i}`)));
    all.forEach((v, i) => expect(v.toString()).toBe(`w${i}`));
  });

  it('a set then delete then set of one key, pipelined, ends with the last value', async () => {
    const server = await serve();
    const c = await client(server.port);
    const results = await Promise.all([
      c.set('x', '1'),
      c.deleteKey('x'),
      c.deleteKey('x'),
      c.set('x', '2'),
      c.add('n', 3),
      c.set('n', '10'),
      c.add('n', 1),
      c.get('x'),
    ]);
    expect(results.slice(1, 3)).toEqual([true, false]);
    expect(results[4]).toBe(3);
    expect(results[6]).toBe(11);
    expect((results[7] as Buffer).toString()).toBe('2');
  });

  it('the requests of one turn leave in one write on the client, and their answers in one write on the server', async () => {
    const server = await serve();
    const c = await client(server.port);
    await c.set('here', 'yes');
    await c.numKeys(); // settled: nothing queued either way
    const writes = jest.spyOn(net.Socket.prototype, 'write');
    try {
      const got = await Promise.all(Array.from({ length: 50 }, () => c.get('here')));
      expect(got.map(String)).toEqual(Array(50).fill('yes'));
      // 50 requests and 50 answers: one write each way (the server runs in this process)
      expect(writes).toHaveBeenCalledTimes(2);
    } finally {
      writes.mockRestore();
    }
  });

  it('a refused set fails the get waiting for its key at once, naming the key; the next set and get work', async () => {
    const server = await serve({ maxKeys: 2 });
    const c = await client(server.port);
    await c.set('a', '1');
    await c.set('b', '2');
    const started = Date.now();
    await c.set('c', '3'); // resolves: torch's set does not wait either
    const e = await c.get('c', 15_000).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(StoreLimitError);
    expect((e as Error).message).toBe('TcpStore: set of key "c" refused: key c not added: the store holds 2 keys, its limit (maxKeys 2)');
    expect(Date.now() - started).toBeLessThan(5000);
    // reported once: the connection goes on
    await c.set('a', 'A');
    expect((await c.get('a')).toString()).toBe('A');
    expect(await c.numKeys()).toBe(2);
  });

  it('a refused set with no read in flight fails the next operation, whatever it is, or close()', async () => {
    const server = await serve({ maxFrameBytes: 1024 });
    const c = await client(server.port);
    // an add in flight after the set is answered (it changed the store); the refusal is kept
    const [, added] = await Promise.all([c.set('big', Buffer.alloc(4096)), c.add('n', 1)]);
    expect(added).toBe(1);
    const next = await c.add('n', 1).catch((err: unknown) => err);
    expect(next).toBeInstanceOf(StoreLimitError);
    expect((next as Error).message).toMatch(/^TcpStore: set of key "big" refused: a request of \d+ bytes is over the store's limit \(maxFrameBytes 1024\)$/);
    expect((await c.get('n')).toString()).toBe('1'); // the add that reported it was never sent
    expect(await c.check(['big'])).toBe(false);
    // a run of refused sets is reported once, by one error counting them; then the connection goes on
    for (let i = 0; i < 100; i++) await c.set(`flood/${i}`, Buffer.alloc(2048));
    expect(await c.deleteKey('none')).toBe(false); // answered after every refusal arrived
    const flood = await c.numKeys().catch((err: unknown) => err);
    expect(flood).toBeInstanceOf(StoreLimitError);
    expect((flood as Error).message).toMatch(
      /^TcpStore: set of key "flood\/0" refused: .*; 99 later set\(s\) refused too: flood\/1, flood\/2, flood\/3, flood\/4, flood\/5, flood\/6, flood\/7, flood\/8, \.\.\.$/,
    );
    expect(await c.numKeys()).toBe(1);
    // close() confirms the last sets and reports a refusal no operation took
    const d = await TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 20_000 });
    await d.set('big3', Buffer.alloc(4096));
    const closing = await d.close().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(closing).toBeInstanceOf(StoreLimitError);
    expect((closing as Error).message).toMatch(/^TcpStore: set of key "big3" refused/);
    // a clean close after good sets throws nothing, and the sets are there
    const g = await TcpStore.create({ host: '127.0.0.1', port: server.port, timeoutMs: 20_000 });
    for (let i = 0; i < 100; i++) await g.set(`g/${i}`, String(i));
    await g.close();
    const other = await client(server.port);
    expect(await other.check(Array.from({ length: 100 }, (_, i) => `g/${i}`))).toBe(true);
  });

  it('a server killed mid-run fails pending requests at once, and the next call names the unconfirmed sets', async () => {
    const script = `require(${JSON.stringify(path.join(__dirname, '../src'))}).startTcpStoreServer({ port: 0 }).then((s) => console.log(JSON.stringify({ port: s.port })));`;
    const proc = spawn(process.execPath, ['-r', require.resolve('@swc-node/register'), '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        proc.stdout!.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()).port));
        proc.once('exit', () => reject(new Error('server process exited')));
      });
      const c = await client(port, 60_000);
      await c.set('before', '1');
      expect((await c.get('before')).toString()).toBe('1');
      const parked = c.get('never').catch((err: unknown) => err);
      await c.set('unconfirmed', '1');
      const started = Date.now();
      proc.kill('SIGKILL');
      const e = await parked;
      expect(e).toBeInstanceOf(StoreError);
      expect(e).not.toBeInstanceOf(DistTimeoutError);
      expect(Date.now() - started).toBeLessThan(5000);
      const next = await c.numKeys().catch((err: unknown) => err);
      expect(next).toBeInstanceOf(StoreError);
      expect((next as Error).message).toMatch(/lost.*may not have stored the last 1 set\(s\): unconfirmed$/);
      await expect(c.set('after', '1')).rejects.toBeInstanceOf(StoreError);
    } finally {
      proc.kill('SIGKILL');
    }
  });

  it('wire: SET is still answered (older clients), SET_QUIET only when refused, with its id', async () => {
    const server = await serve({ maxKeys: 1 });
    const r = await raw(server.port);
    r.sock.write(
      Buffer.concat([
        encodeFrame(Cmd.SET, 1, [Buffer.from('a'), Buffer.from('1')]),
        encodeFrame(Cmd.SET_QUIET, 2, [Buffer.from('a'), Buffer.from('2')]),
        encodeFrame(Cmd.SET_QUIET, 3, [Buffer.from('b'), Buffer.from('3')]),
        encodeFrame(Cmd.SET_QUIET, 4, [Buffer.from('a')]),
        encodeFrame(Cmd.GET, 5, [Buffer.from('a')]),
      ]),
    );
    const frames = await r.until(4);
    r.sock.destroy();
    expect(frames.map((f) => [f.id, f.tag])).toEqual([
      [1, REPLY_OK],
      [3, REPLY_ERROR],
      [4, REPLY_ERROR],
      [5, REPLY_OK],
    ]);
    expect(frames[1].fields.map(String)).toEqual(['key b not added: the store holds 1 keys, its limit (maxKeys 1)', 'LIMIT']);
    expect(frames[2].fields[0].toString()).toBe(`store command ${Cmd.SET_QUIET} takes 2 fields, got 1`);
    expect(frames[3].fields[0].toString()).toBe('2');
  });

  it("500 clients in 4 processes each set a key and get a neighbour's, pipelined: every value right", async () => {
    const server = await serve();
    const PROCS = 4;
    const PER = 125;
    const total = PROCS * PER;
    const src = JSON.stringify(path.join(__dirname, '../src'));
    const script = `
      const { TcpStore } = require(${src});
      const [port, first, count, total] = process.argv.slice(1).map(Number);
      (async () => {
        const stores = await Promise.all(Array.from({ length: count }, () => TcpStore.create({ host: '127.0.0.1', port, timeoutMs: 60000 })));
        const got = await Promise.all(stores.map(async (s, i) => {
          const r = first + i;
          await s.set('rank/' + r, 'v' + r);
          return (await s.get('rank/' + ((r + 1) % total))).toString();
        }));
        await Promise.all(stores.map((s) => s.close()));
        console.log(JSON.stringify(got));
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const outputs = await Promise.all(
      Array.from({ length: PROCS }, (_, p) => {
        const proc = spawn(
          process.execPath,
          ['-r', require.resolve('@swc-node/register'), '-e', script, String(server.port), String(p * PER), String(PER), String(total)],
          {
            stdio: ['ignore', 'pipe', 'inherit'],
          },
        );
        let out = '';
        proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        return new Promise<string[]>((resolve, reject) =>
          proc.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client process exited ${code}`)))),
        );
      }),
    );
    outputs.forEach((got, p) => got.forEach((v, i) => expect(v).toBe(`v${(p * PER + i + 1) % total}`)));
    expect(server.usage().keys).toBe(total);
  });
});
