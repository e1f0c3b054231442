// The run's shared secret: TcpStore and data-plane connections pass an HMAC challenge before
// anything else crosses them. Strangers (no secret, a wrong one, a raw socket) are refused with a
// typed error on their side and one log line on the listener's, which never shows the secret,
// and the store's state is as it was.
import * as net from 'net';
import { AuthenticationError, generateSecret, InvalidArgumentError, PeerFailureError, ProcessGroup, TcpStore } from '../src';
import { TcpBackend } from '../src/backends/tcp/tcp-backend';
import { Mesh } from '../src/transport/mesh';
import { AUTH_MESSAGE_BYTES, AuthDialer, readRefusal, RefuseReason } from '../src/auth/handshake';
import { encodeFrame, utf8 } from '../src/store/frame-codec';

const SECRET = generateSecret();
const OTHER = generateSecret();

/** What this process writes to stderr while fn runs. */
async function stderrOf(fn: () => Promise<void>): Promise<string> {
  const chunks: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((c: string | Uint8Array, ...rest: unknown[]) => {
    chunks.push(typeof c === 'string' ? c : Buffer.from(c).toString());
    return (write as (...a: unknown[]) => boolean)(c, ...rest);
  }) as typeof process.stderr.write;
  try {
    await fn();
  } finally {
    process.stderr.write = write;
  }
  return chunks.join('');
}

/** Connects a raw socket, sends `bytes`, returns everything it reads until the server closes. */
async function raw(port: number, bytes: Buffer): Promise<Buffer> {
  const s = net.connect({ host: '127.0.0.1', port });
  const got: Buffer[] = [];
  s.on('data', (c) => got.push(c));
  await new Promise<void>((resolve, reject) => {
    s.once('connect', () => s.write(bytes));
    s.once('close', () => resolve());
    s.once('error', reject);
    setTimeout(() => reject(new Error('server did not close the connection')), 5000).unref();
  });
  return Buffer.concat(got);
}

describe('TcpStore with a secret', () => {
  let master: TcpStore;
  beforeEach(async () => {
    master = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000, secret: SECRET });
    await master.set('before', 'kept');
  });
  afterEach(() => master.close());

  async function unchanged(): Promise<void> {
    expect(await master.numKeys()).toBe(1);
    expect((await master.get('before')).toString()).toBe('kept');
    expect(await master.check(['intruder'])).toBe(false);
  }

  it('a client with the same secret works', async () => {
    const client = await TcpStore.create({ port: master.port, timeoutMs: 5000, secret: SECRET });
    try {
      await client.set('k', 'v');
      expect((await master.get('k')).toString()).toBe('v');
      expect(await client.add('n', 3)).toBe(3);
      expect((await client.get('before')).toString()).toBe('kept');
    } finally {
      await client.close();
    }
  });

  it('a client without a secret is refused: typed error, one log line without the secret, state unchanged', async () => {
    let err: unknown;
    const log = await stderrOf(async () => {
      const client = new TcpStore({ port: master.port, timeoutMs: 5000 });
      await client.set('intruder', 'x'); // not answered: the refusal comes with the next call, here close()
      err = await client.close().catch((e) => e);
    });
    expect(err).toBeInstanceOf(AuthenticationError);
    expect((err as Error).message).toMatch(/requires a secret and this client has none/);
    expect(log).toMatch(/cmesh: TcpStore refused a connection from 127\.0\.0\.1:\d+: the connection did not authenticate/);
    expect(log).not.toContain(SECRET);
    await unchanged();
  });

  it('a client with a wrong secret is refused at once (not retried), never learning the server proof', async () => {
    let err: unknown;
    const started = Date.now();
    const log = await stderrOf(async () => {
      err = await TcpStore.create({ port: master.port, timeoutMs: 5000, secret: OTHER }).catch((e) => e);
    });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect((err as Error).message).toMatch(/refused this connection: wrong secret/);
    expect((err as Error).message).not.toContain(OTHER);
    expect(log).toMatch(/TcpStore refused a connection from 127\.0\.0\.1:\d+: wrong secret/);
    expect(log).not.toContain(SECRET);
    expect(log).not.toContain(OTHER);
    await unchanged();
  });

  it('a raw socket sending store frames gets a refusal and nothing else; the frames are never parsed', async () => {
    const frame = encodeFrame(1 /* SET */, 1, [utf8('intruder'), utf8('x')]);
    const bytes = await raw(master.port, Buffer.concat([frame, frame]));
    expect(bytes.length).toBe(AUTH_MESSAGE_BYTES);
    expect(readRefusal(bytes)).toBe(RefuseReason.NoAuthentication);
    await unchanged();
  });

  it('a forged proof (hello, then random bytes) is refused as a wrong secret', async () => {
    const hello = new AuthDialer(Buffer.from(OTHER), 'store').hello();
    const s = net.connect({ host: '127.0.0.1', port: master.port });
    const got: Buffer[] = [];
    s.on('data', (c) => {
      got.push(c);
      if (Buffer.concat(got).length === AUTH_MESSAGE_BYTES) s.write(Buffer.alloc(32, 7)); // after the challenge
    });
    await new Promise<void>((resolve) => {
      s.once('connect', () => s.write(hello));
      s.once('close', () => resolve());
    });
    const all = Buffer.concat(got);
    expect(all.length).toBe(2 * AUTH_MESSAGE_BYTES);
    expect(readRefusal(all.subarray(AUTH_MESSAGE_BYTES))).toBe(RefuseReason.WrongSecret);
    await unchanged();
  });

  it('a client with a secret refuses a server without one', async () => {
    const open = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    try {
      const err = await TcpStore.create({ port: open.port, timeoutMs: 5000, secret: SECRET }).catch((e) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.message).toMatch(/this client has a secret but the store at .* has none/);
      expect(await open.numKeys()).toBe(0);
    } finally {
      await open.close();
    }
  });

  it('a short secret is refused without echoing it', () => {
    expect(() => new TcpStore({ port: 1, secret: 'tooshort' })).toThrow(InvalidArgumentError);
    expect(() => new TcpStore({ port: 1, secret: 'tooshort' })).not.toThrow(/tooshort/);
  });
});

describe('data plane with a secret', () => {
  async function world(secrets: (string | undefined)[]): Promise<{ meshes: PromiseSettledResult<Mesh>[]; store: TcpStore; close: () => Promise<void> }> {
    const store = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    const meshes = await Promise.allSettled(
      secrets.map((secret, rank) => Mesh.create({ rank, size: secrets.length, store, timeoutMs: 3000, transport: 'tcp', secret })),
    );
    return {
      meshes,
      store,
      close: async () => {
        for (const m of meshes) if (m.status === 'fulfilled') await m.value.close();
        await store.close();
      },
    };
  }

  it('ranks with the same secret connect and reduce; a stranger claiming a rank first is refused and logged', async () => {
    const store = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    let meshes: Mesh[] = [];
    const log = await stderrOf(async () => {
      const m0 = Mesh.create({ rank: 0, size: 2, store, timeoutMs: 5000, transport: 'tcp', secret: SECRET });
      const [host, port] = (await store.get('mesh/addr/0')).toString().split(':');
      // unauthenticated, it would have been taken for rank 1
      const rank1 = Buffer.alloc(4);
      rank1.writeUInt32LE(1);
      const reply = await raw(Number(port), rank1);
      expect(host).toBe('127.0.0.1');
      expect(readRefusal(reply)).toBe(RefuseReason.NoAuthentication);
      meshes = await Promise.all([m0, Mesh.create({ rank: 1, size: 2, store, timeoutMs: 5000, transport: 'tcp', secret: SECRET })]);
    });
    try {
      expect(log).toMatch(/cmesh: data plane refused a connection from 127\.0\.0\.1:\d+: the connection did not authenticate/);
      expect(log).not.toContain(SECRET);
      const pgs = meshes.map((m, rank) => new ProcessGroup(0, [0, 1], rank, new TcpBackend(m, 0, [0, 1]), 5000));
      const data = [new Float32Array([1, 2, 3]), new Float32Array([10, 20, 30])];
      await Promise.all(pgs.map((pg, r) => pg.allReduce(data[r])));
      for (const d of data) expect([...d]).toEqual([11, 22, 33]);
    } finally {
      for (const m of meshes) await m.close();
      await store.close();
    }
  });

  it('a rank with a different secret fails with AuthenticationError naming the peer; the listener logs it', async () => {
    let w!: Awaited<ReturnType<typeof world>>;
    const log = await stderrOf(async () => {
      w = await world([SECRET, OTHER]);
    });
    try {
      const [, r1] = w.meshes;
      expect(r1.status).toBe('rejected');
      const err = (r1 as PromiseRejectedResult).reason;
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.message).toMatch(/rank 0 at 127\.0\.0\.1:\d+: it refused this rank: wrong secret/);
      expect(err.context.peers).toEqual([0]);
      expect(log).toMatch(/data plane refused a connection .*: wrong secret/);
      expect(log).not.toContain(SECRET);
      expect(log).not.toContain(OTHER);
    } finally {
      await w.close();
    }
  });

  it('a peer that dies during the handshake (connection reset) fails the dialer with PeerFailureError naming it', async () => {
    const store = await TcpStore.create({ port: 0, isMaster: true, timeoutMs: 5000 });
    // rank 0 reads the hello and is gone: the kernel resets the connection
    const dying = net.createServer((s) => s.once('data', () => s.resetAndDestroy()));
    await new Promise<void>((r) => dying.listen(0, '127.0.0.1', r));
    try {
      await store.set('mesh/host/0', 'another-host');
      await store.set('mesh/addr/0', `127.0.0.1:${(dying.address() as net.AddressInfo).port}`);
      const err = await Mesh.create({ rank: 1, size: 2, store, timeoutMs: 3000, transport: 'tcp', secret: SECRET }).then(
        (m) => m.close().then(() => undefined),
        (e) => e,
      );
      expect(err).toBeInstanceOf(PeerFailureError);
      expect(err.message).toMatch(/rank 0 at 127\.0\.0\.1:\d+ died or closed its connection during authentication/);
      expect(err.context.peers).toEqual([0]);
    } finally {
      await new Promise((r) => dying.close(r));
      await store.close();
    }
  });

  it('a rank with a secret refuses to talk to a listener without one', async () => {
    const w = await world([undefined, SECRET]);
    try {
      const err = (w.meshes[1] as PromiseRejectedResult).reason;
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.message).toMatch(/this rank has a secret and that one has none/);
    } finally {
      await w.close();
    }
  });
});
