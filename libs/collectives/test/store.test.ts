// Store semantics (c10d): TcpStore across processes, FileStore, PrefixStore.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DistTimeoutError, FileStore, InvalidArgumentError, PrefixStore, Store, TcpStore } from '../src';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-store-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function semantics(a: Store, b: Store): Promise<void> {
  const pending = b.get('late');
  await a.set('late', 'value');
  expect((await pending).toString()).toBe('value');
  await a.set('bin', new Uint8Array([0, 255, 7]));
  expect([...(await b.get('bin'))]).toEqual([0, 255, 7]);
  expect(await a.add('ctr', 5)).toBe(5);
  expect(await b.add('ctr', -2)).toBe(3);
  expect((await a.compareSet('cs', '', 'first')).toString()).toBe('first');
  expect((await b.compareSet('cs', 'wrong', 'second')).toString()).toBe('first');
  expect((await b.compareSet('cs', 'first', 'second')).toString()).toBe('second');
  expect((await a.compareSet('missing', 'x', 'y')).toString()).toBe('x');
  expect(await a.check(['late', 'ctr'])).toBe(true);
  expect(await a.check(['late', 'nope'])).toBe(false);
  await expect(b.wait(['late', 'never-1', 'never-2'], 150)).rejects.toThrow(/never-1, never-2/);
  await expect(b.get('never', 100)).rejects.toBeInstanceOf(DistTimeoutError);
  expect(await a.deleteKey('late')).toBe(true);
  expect(await a.deleteKey('late')).toBe(false);
  expect(await b.check(['late'])).toBe(false);
  await expect(a.set('', 'x')).rejects.toBeInstanceOf(InvalidArgumentError);
  await expect(a.add('ctr', 1.5)).rejects.toBeInstanceOf(InvalidArgumentError);
  const n = await a.numKeys();
  await new PrefixStore('p', a).set('k', 'v');
  expect((await b.get('p/k')).toString()).toBe('v');
  expect(await new PrefixStore('p', b).check(['k'])).toBe(true);
  expect(await a.numKeys()).toBe(n + 1);
}

describe('TcpStore', () => {
  it('has c10d semantics between a master and a client', async () => {
    const master = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    const client = await TcpStore.create({ port: master.port, timeoutMs: 5000 });
    try {
      await semantics(master, client);
    } finally {
      await client.close();
      await master.close();
    }
  });

  it('a client started before the server retries until it is up; a missing server times out', async () => {
    const master0 = await TcpStore.create({ port: 0, isMaster: true });
    const port = master0.port;
    await master0.close();
    const early = TcpStore.create({ port, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 300));
    const master = await TcpStore.create({ port, isMaster: true });
    const client = await early;
    await client.set('x', '1');
    expect((await master.get('x')).toString()).toBe('1');
    await client.close();
    await master.close();
    await expect(TcpStore.create({ port, timeoutMs: 300 })).rejects.toThrow(/could not connect/);
  });

  it('add() is exact with 4 processes adding concurrently', async () => {
    const master = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 10000 });
    const script = `const { TcpStore } = require(${JSON.stringify(path.resolve(__dirname, '../src/store'))});
      (async () => { const s = await TcpStore.create({ port: ${master.port} }); await Promise.all(Array.from({ length: 250 }, () => s.add('n', 1))); await s.close(); })();`;
    const kids = Array.from({ length: 4 }, () => spawn(process.execPath, ['-r', require.resolve('@swc-node/register'), '-e', script], { stdio: 'ignore' }));
    try {
      await Promise.all(kids.map((k) => new Promise((r) => k.on('exit', r))));
      expect(await master.add('n', 0)).toBe(1000);
    } finally {
      kids.forEach((k) => k.exitCode === null && k.kill('SIGKILL'));
      await master.close();
    }
  }, 30000);
});

describe('FileStore', () => {
  it('has c10d semantics between two handles on one file', async () => {
    const file = path.join(tmp, 'a');
    await semantics(new FileStore(file, { timeoutMs: 5000 }), new FileStore(file, { timeoutMs: 5000 }));
  });

  it('add() is exact with 3 processes adding concurrently', async () => {
    const file = path.join(tmp, 'b');
    const script = `const { FileStore } = require(${JSON.stringify(path.resolve(__dirname, '../src/store'))});
      (async () => { const s = new FileStore(${JSON.stringify(file)}); for (let i = 0; i < 40; i++) await s.add('n', 1); })();`;
    const kids = Array.from({ length: 3 }, () => spawn(process.execPath, ['-r', require.resolve('@swc-node/register'), '-e', script], { stdio: 'ignore' }));
    try {
      await Promise.all(kids.map((k) => new Promise((r) => k.on('exit', r))));
      expect(await new FileStore(file).add('n', 0)).toBe(120);
    } finally {
      kids.forEach((k) => k.exitCode === null && k.kill('SIGKILL'));
    }
  }, 30000);
});
