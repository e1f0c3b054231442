// Store details beyond the shared semantics: torch's TCPStore constructor form, world-size wait,
// the standalone server, bad input changing nothing, FileStore clean-up and stale locks.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import {
  DistTimeoutError,
  FileStore,
  InvalidArgumentError,
  PrefixStore,
  rendezvous,
  startTcpStoreServer,
  StoreError,
  TCP_STORE_WORKERS_KEY,
  TcpStore,
} from '../src';
import { Cmd, encodeFrame, FrameDecoder } from '../src/store/frame-codec';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-store-x-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('TcpStore (torch constructor form)', () => {
  it('new TcpStore() connects in the background; operations wait for it, even before the server exists', async () => {
    const server = await startTcpStoreServer({ port: 0 });
    const port = server.port;
    await server.close();
    const client = new TcpStore({ port, timeoutMs: 5000 });
    const pendingSet = client.set('early', 'yes'); // issued before any server listens
    await new Promise((r) => setTimeout(r, 200));
    const master = new TcpStore({ port, isMaster: true, timeoutMs: 5000 });
    await pendingSet;
    expect((await master.get('early')).toString()).toBe('yes');
    await master.ready();
    expect(master.isMaster).toBe(true);
    expect(client.isMaster).toBe(false);
    await client.close();
    await master.close();
    await expect(client.get('early')).rejects.toBeInstanceOf(StoreError);
  });

  it('calls made while connecting reach the server before calls made once it is ready, in the order made', async () => {
    const server = await startTcpStoreServer({ port: 0 });
    const client = new TcpStore({ port: server.port, timeoutMs: 5000 });
    try {
      const early = [client.set('k', 'one'), client.add('n', 1), client.set('k', 'two')];
      // runs while the calls above and below still wait for start-up: its calls must queue behind them
      const late = client.ready().then(() => Promise.all([client.check(['k']), client.get('k'), client.add('n', 10), client.set('k', 'four')]));
      early.push(client.set('k', 'three'));
      const [[seen, value, n]] = await Promise.all([late, ...early]);
      expect(seen).toBe(true);
      expect(String(value)).toBe('three');
      expect(n).toBe(11);
      expect(String(await client.get('k'))).toBe('four');
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('with worldSize the master is ready only when every worker connected (one reserved key, like torch)', async () => {
    const master = new TcpStore({ port: 0, isMaster: true, worldSize: 3, timeoutMs: 5000 });
    let ready = false;
    void master.ready().then(() => (ready = true));
    for (let i = 0; i < 100 && master.port === 0; i++) await new Promise((r) => setTimeout(r, 10)); // listening
    const port = master.port;
    expect(port).toBeGreaterThan(0);
    const w1 = await TcpStore.create({ port, worldSize: 3, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 100));
    expect(ready).toBe(false);
    const w2 = await TcpStore.create({ port, worldSize: 3, timeoutMs: 5000 });
    await master.ready();
    expect(await master.add(TCP_STORE_WORKERS_KEY, 0)).toBe(3);
    expect(await w1.numKeys()).toBe(1);
    await Promise.all([w1.close(), w2.close(), master.close()]);
  });

  it('a master waiting for missing workers times out saying how many came', async () => {
    await expect(TcpStore.create({ port: 0, isMaster: true, worldSize: 2, timeoutMs: 300 })).rejects.toThrow(/only 1 of 2 workers connected .* within 300 ms/);
  });

  it('bad input is InvalidArgumentError and changes nothing', async () => {
    const server = await startTcpStoreServer();
    const s = await TcpStore.create({ port: server.port, timeoutMs: 5000 });
    try {
      await s.set('k', '1');
      const before = await s.numKeys();
      await expect(s.set(5 as any, 'x')).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(s.set('k', 42 as any)).rejects.toThrow(/string or a Uint8Array/);
      await expect(s.add('k', '1' as any)).rejects.toThrow(/amount must be an integer, got 1/);
      await expect(s.add('k', 0.5)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(s.wait('k' as any)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(s.get('k', -1)).rejects.toThrow(/timeout must be a non-negative/);
      await expect(s.compareSet(null as any, '', 'x')).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(() => new TcpStore({ port: 0 })).toThrow(/port must be an integer in \[1, 65535\]/);
      expect(() => new TcpStore({ port: 1, worldSize: 0 })).toThrow(/worldSize must be an integer >= 1/);
      expect(await s.numKeys()).toBe(before);
      expect((await s.get('k')).toString()).toBe('1');
      // a key that holds text is not a counter: a StoreError, and the value stays
      await s.set('text', 'abc');
      await expect(s.add('text', 1)).rejects.toThrow(/does not hold an integer/);
      expect((await s.get('text')).toString()).toBe('abc');
    } finally {
      await s.close();
      await server.close();
    }
  });

  it('a client speaking garbage is dropped while the server keeps serving the others', async () => {
    const server = await startTcpStoreServer();
    const good = await TcpStore.create({ port: server.port, timeoutMs: 5000 });
    try {
      const bad = net.connect({ port: server.port, host: '127.0.0.1' });
      const closed = new Promise((r) => bad.on('close', r));
      bad.on('error', () => undefined);
      bad.write(Buffer.from([3, 0, 0, 0, 1, 2, 3])); // a frame too short to be valid
      await closed;
      await good.set('still', 'fine');
      expect((await good.get('still')).toString()).toBe('fine');
    } finally {
      await good.close();
      await server.close();
    }
  });

  it('after a malformed frame the server answers what came before it and half-closes, never resets, while the client still sends', async () => {
    const server = await startTcpStoreServer();
    const good = await TcpStore.create({ port: server.port, timeoutMs: 5000 });
    // half-open on our side: we go on sending after the server's FIN, as a client still writing would
    const bad = net.connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true });
    const connected = new Promise((r) => bad.once('connect', r));
    try {
      await good.set('k', 'v');
      const decoder = new FrameDecoder();
      const replies: number[] = [];
      const events: string[] = [];
      bad.on('data', (d) => replies.push(...decoder.push(d).map((f) => f.id)));
      bad.on('end', () => events.push('end'));
      bad.on('error', (e) => events.push((e as NodeJS.ErrnoException).code ?? e.message));
      const closed = new Promise((r) => bad.on('close', r));
      await connected;
      const gets = Array.from({ length: 20 }, (_, i) => encodeFrame(Cmd.GET, i + 1, [Buffer.from('k')]));
      const short = Buffer.from([3, 0, 0, 0, Cmd.GET, 0, 0, 0, 0, 0, 0]); // length 3: shorter than a header
      short.writeUInt32LE(999, 5);
      bad.write(Buffer.concat([...gets, short]));
      // bytes the server will never parse, for 300 ms after its FIN
      for (let i = 0; i < 30; i++) {
        bad.write(Buffer.alloc(4096, 0x55));
        await new Promise((r) => setTimeout(r, 10));
      }
      bad.end();
      await closed;
      expect(events).toEqual(['end']);
      // each request, then the error naming the malformed frame
      expect(replies).toEqual([...Array.from({ length: 20 }, (_, i) => i + 1), 999]);
      expect((await good.get('k')).toString()).toBe('v');
    } finally {
      bad.destroy();
      await good.close();
      await server.close();
    }
  });

  it('a server that is not a store fails requests with StoreError instead of hanging', async () => {
    const fake = net.createServer((s) => s.on('data', () => s.write(Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n'))));
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const s = await TcpStore.create({ port: (fake.address() as net.AddressInfo).port, timeoutMs: 5000 });
    try {
      await s.set('k', 'v'); // not answered: the next request learns what became of it
      await expect(s.numKeys()).rejects.toThrow(
        /^TcpStore: connection to .* lost: malformed store frame .*; the server may not have stored the last 1 set\(s\): k$/,
      );
      await expect(s.numKeys()).rejects.toBeInstanceOf(StoreError);
    } finally {
      await s.close();
      await new Promise((r) => fake.close(r));
    }
  });

  it('pipelines many requests on one connection and answers each in order of its own', async () => {
    const master = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    const client = await TcpStore.create({ port: master.port, timeoutMs: 5000 });
    try {
      const gets = Array.from({ length: 50 }, (_, i) => client.get(`k${i}`));
      await Promise.all(Array.from({ length: 50 }, (_, i) => master.set(`k${49 - i}`, `v${49 - i}`)));
      const values = (await Promise.all(gets)).map((b) => b.toString());
      expect(values).toEqual(Array.from({ length: 50 }, (_, i) => `v${i}`));
    } finally {
      await client.close();
      await master.close();
    }
  });

  it('a wait on several keys is answered only when all exist at once, also when one was deleted meanwhile, and once', async () => {
    const master = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    const client = await TcpStore.create({ port: master.port, timeoutMs: 5000 });
    const leaving = await TcpStore.create({ port: master.port, timeoutMs: 5000 });
    try {
      let answered = 0;
      const both = client.wait(['a', 'b', 'a']).then(() => answered++);
      const getB = client.get('b');
      // a connection that closes with waits parked takes them along; the others stay parked
      void leaving.wait(['a', 'b']).catch(() => undefined);
      void leaving.get('b').catch(() => undefined);
      await master.set('a', '1');
      await master.deleteKey('a');
      await master.set('b', '2');
      expect((await getB).toString()).toBe('2');
      await leaving.close();
      expect(await client.check(['b'])).toBe(true); // a round trip after the set: the wait had its chance
      expect(answered).toBe(0); // "a" was deleted before "b" came
      await master.add('a', 1);
      await both;
      await master.set('a', '3'); // writing a key again answers nothing twice
      expect(await client.check(['a', 'b'])).toBe(true);
      expect(answered).toBe(1);
      expect(await master.numKeys()).toBe(2);
    } finally {
      await client.close();
      await master.close();
    }
  });
});

describe('PrefixStore', () => {
  it('nests prefixes and names prefixed keys in timeouts', async () => {
    const base = new FileStore(path.join(tmp, 'prefix'), { timeoutMs: 2000 });
    const inner = new PrefixStore('b', new PrefixStore('a', base));
    await inner.set('x', '1');
    expect(await base.check(['a/b/x'])).toBe(true);
    expect(await inner.add('n', 2)).toBe(2);
    expect((await base.get('a/b/n')).toString()).toBe('2');
    await expect(inner.wait(['x', 'y'], 50)).rejects.toThrow(/\[a\/b\/y\]/);
    await expect(inner.wait(['y'], 50)).rejects.toBeInstanceOf(DistTimeoutError);
  });
});

describe('FileStore', () => {
  it('new FileStore(path, worldSize): the last of worldSize handles to close removes the file', async () => {
    const file = path.join(tmp, 'ws');
    const a = new FileStore(file, 2);
    const b = new FileStore(file, 2);
    await a.set('k', 'v');
    expect((await b.get('k', 1000)).toString()).toBe('v');
    await a.close();
    await a.close(); // counted once
    expect(fs.existsSync(file)).toBe(true);
    await expect(a.get('k')).rejects.toBeInstanceOf(StoreError);
    await b.close();
    expect(fs.existsSync(file)).toBe(false);
  });

  it('breaks a lock left by a process that died', async () => {
    const file = path.join(tmp, 'stale');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    fs.writeFileSync(`${file}.lock`, `${os.hostname()}:${dead.stdout}`);
    const s = new FileStore(file, { timeoutMs: 3000 });
    expect(await s.add('n', 1)).toBe(1);
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it('a lock held by a live process makes mutations time out, not hang', async () => {
    const file = path.join(tmp, 'held');
    fs.writeFileSync(`${file}.lock`, `${os.hostname()}:${process.pid}`);
    const s = new FileStore(file, { timeoutMs: 200 });
    await expect(s.set('k', 'v')).rejects.toThrow(/could not lock .* within 200 ms/);
    fs.rmSync(`${file}.lock`);
    await s.set('k', 'v');
    expect(await s.numKeys()).toBe(1);
  });
});

describe('init methods', () => {
  it('env:// : rank 0 hosts the store, explicit arguments win over the environment', async () => {
    const server = await startTcpStoreServer(); // only to find a free port
    const port = server.port;
    await server.close();
    const env = { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) };
    const [r0, r1] = await Promise.all([rendezvous({ env, rank: 0, timeoutMs: 5000 }), rendezvous({ env, timeoutMs: 5000 })]);
    try {
      expect([r0.rank, r0.worldSize, r1.rank, r1.worldSize]).toEqual([0, 2, 1, 2]);
      expect((r0.store as TcpStore).isMaster).toBe(true);
      expect((r1.store as TcpStore).isMaster).toBe(false);
      await r1.store.set('hello', 'from 1');
      expect((await r0.store.get('hello')).toString()).toBe('from 1');
    } finally {
      await r1.store.close();
      await r0.store.close();
    }
  });

  it('env:// names each missing variable; ranks out of range are rejected', async () => {
    await expect(rendezvous({ env: { RANK: '0', MASTER_ADDR: 'h', MASTER_PORT: '1' } })).rejects.toThrow(
      'environment variable WORLD_SIZE expected, but not set',
    );
    await expect(rendezvous({ env: { RANK: '0', WORLD_SIZE: '1', MASTER_PORT: '1' } })).rejects.toThrow(
      'environment variable MASTER_ADDR expected, but not set',
    );
    await expect(rendezvous({ env: { RANK: '3', WORLD_SIZE: '2', MASTER_ADDR: 'h', MASTER_PORT: '1' } })).rejects.toThrow('rank must be in [0, 2), got 3');
    await expect(rendezvous({ env: { RANK: 'x', WORLD_SIZE: '2', MASTER_ADDR: 'h', MASTER_PORT: '1' } })).rejects.toThrow('RANK must be an integer, got "x"');
  });

  it('file:// shares one file between ranks and removes it when every rank has closed', async () => {
    const file = path.join(tmp, 'init');
    const url = `file://${file}`;
    const [a, b] = await Promise.all([rendezvous({ initMethod: url, rank: 0, worldSize: 2 }), rendezvous({ initMethod: `${url}?rank=1&world_size=2` })]);
    expect([a.rank, b.rank, b.worldSize]).toEqual([0, 1, 2]);
    await a.store.set('x', 'y');
    expect((await b.store.get('x')).toString()).toBe('y');
    await a.store.close();
    await b.store.close();
    expect(fs.existsSync(file)).toBe(false);
  });

  it('tcp:// without a rank says where to give one', async () => {
    await expect(rendezvous({ initMethod: 'tcp://127.0.0.1:1', worldSize: 2, env: {} })).rejects.toThrow(/rank is required/);
  });
});
