// The sidecar's protocol against the real binary, on a machine without a GPU or NCCL: hello says
// why NCCL is unavailable, bad frames get error frames while the sidecar keeps serving, unknown
// ops and bad fields are typed errors, and timeouts are honoured.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';

import {
  buildSidecar,
  FrameDecoder,
  Frame,
  NcclUnavailableError,
  SidecarClient,
  SidecarConnectionError,
  SidecarInvalidArgumentError,
  SidecarProcess,
  SidecarProtocolError,
  SidecarTimeoutError,
  spawnSidecar,
} from '../src/backends/nccl';

const MISSING_NCCL = '/nonexistent/cmesh-test/libnccl.so.2';

let binary: string;
let dir: string;
let sidecar: SidecarProcess;
let client: SidecarClient;
const extraProcs: SidecarProcess[] = [];

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A raw connection for writing arbitrary bytes and reading whatever frames come back. */
class RawConnection {
  private readonly decoder = new FrameDecoder();
  private readonly frames: Frame[] = [];
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.frames.push(...this.decoder.push(c));
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static open(socketPath: string): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const s = net.createConnection({ path: socketPath }, () => resolve(new RawConnection(s)));
      s.once('error', reject);
    });
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  /** The next frame, or null if the connection closed first; fails after `timeoutMs`. */
  async next(timeoutMs = 5000): Promise<Frame | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.frames.length === 0 && !this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no frame within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.frames.shift() ?? null;
  }

  async waitClosed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('connection still open');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }
}

function rawFrame(headerText: string, payload = Buffer.alloc(0)): Buffer {
  const h = Buffer.from(headerText, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32LE(4 + h.length + payload.length, 0);
  prefix.writeUInt32LE(h.length, 4);
  return Buffer.concat([prefix, h, payload]);
}

function errorOf(f: Frame | null): { code: string; message: string } {
  expect(f).not.toBeNull();
  expect(f!.header.ok).toBe(false);
  return f!.header.error as { code: string; message: string };
}

beforeAll(async () => {
  binary = buildSidecar();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-sidecar-test-'));
  sidecar = await spawnSidecar({
    binary,
    socketPath: path.join(dir, 'main.sock'),
    ncclLib: MISSING_NCCL,
    stallTimeoutMs: 400,
    startTimeoutMs: 20_000,
  });
  client = await SidecarClient.connect(sidecar.socketPath, { marginMs: 3000 });
}, 300_000);

afterAll(async () => {
  client?.close();
  for (const p of [sidecar, ...extraProcs]) {
    if (!p) continue;
    await p.stop(2000);
    expect(isAlive(p.pid)).toBe(false);
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('hello', () => {
  it('reports NCCL unavailable with the reason, and the sidecar identity and limits', async () => {
    const hello = await client.hello();
    expect(hello.protocol).toBe(1);
    expect(hello.pid).toBe(sidecar.pid);
    expect(hello.available).toBe(false);
    expect(hello.nccl.available).toBe(false);
    expect(hello.nccl.reason).toContain(MISSING_NCCL);
    expect(hello.reason).toContain('NCCL unavailable');
    expect(hello.reason).toContain(MISSING_NCCL);
    // CUDA: on this machine there is no driver; wherever there is one, devices are listed.
    expect(hello.cuda.available).toBe(hello.deviceCount > 0);
    expect(hello.devices).toHaveLength(hello.deviceCount);
    if (!hello.cuda.available) {
      expect(hello.cuda.reason!.length).toBeGreaterThan(10);
      expect(hello.reason).toContain('CUDA unavailable');
    }
    expect(hello.limits.stallTimeoutMs).toBe(400);
    expect(hello.limits.defaultTimeoutMs).toBe(30 * 60_000);
    expect(hello.ops).toEqual(expect.arrayContaining(['getUniqueId', 'commInitRank', 'collective', 'abort', 'destroy']));
  });

  it('fails NCCL ops with UNAVAILABLE and the same reason', async () => {
    const err = await client.getUniqueId().catch((e) => e);
    expect(err).toBeInstanceOf(NcclUnavailableError);
    expect(err.sidecarCode).toBe('UNAVAILABLE');
    expect(err.reason).toContain(MISSING_NCCL);
    const init = await client
      .commInitRank({ nranks: 2, rank: 0, uniqueId: '0'.repeat(256), device: 0 })
      .catch((e) => e);
    expect(init).toBeInstanceOf(NcclUnavailableError);
    const coll = await client.collective({ comm: 1, collective: 'allReduce', count: 4 }).catch((e) => e);
    expect(coll).toBeInstanceOf(NcclUnavailableError);
  });

  it('answers handles that do not exist with NOT_FOUND', async () => {
    const err = await client.asyncError(12345).catch((e) => e);
    expect(err.sidecarCode).toBe('NOT_FOUND');
    expect(err.message).toContain('12345');
    const freeErr = await client.free(777).catch((e) => e);
    expect(freeErr.sidecarCode).toBe('NOT_FOUND');
  });
});

describe('malformed frames', () => {
  let raw: RawConnection;
  beforeEach(async () => {
    raw = await RawConnection.open(sidecar.socketPath);
  });
  afterEach(() => raw.destroy());

  it('answers a header that is not JSON with BAD_FRAME and keeps the connection', async () => {
    raw.write(rawFrame('{"id": 1, "op": "hello"'));
    const err = errorOf(await raw.next());
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain('not JSON');
    raw.write(rawFrame('{"id": 2, "op": "hello"}'));
    const ok = await raw.next();
    expect(ok!.header).toMatchObject({ id: 2, ok: true, op: 'hello', protocol: 1 });
  });

  it('answers a header that is not an object, or lacks id or op, with BAD_FRAME', async () => {
    raw.write(rawFrame('[1,2,3]'));
    expect(errorOf(await raw.next()).code).toBe('BAD_FRAME');
    raw.write(rawFrame('{"op": "hello"}'));
    const noId = errorOf(await raw.next());
    expect(noId.code).toBe('BAD_FRAME');
    expect(noId.message).toContain("'id'");
    raw.write(rawFrame('{"id": 9}'));
    const noOp = await raw.next();
    expect(noOp!.header.id).toBe(9);
    expect(errorOf(noOp).message).toContain("'op'");
    raw.write(rawFrame('{"id": 10, "op": "ping"}'));
    expect((await raw.next())!.header).toMatchObject({ id: 10, ok: true });
  });

  it('skips a frame whose headerLength exceeds the frame and keeps the connection', async () => {
    const bad = Buffer.alloc(8 + 6);
    bad.writeUInt32LE(4 + 6, 0);
    bad.writeUInt32LE(1000, 4);
    raw.write(Buffer.concat([bad, rawFrame('{"id": 3, "op": "ping"}')]));
    const err = errorOf(await raw.next());
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain('headerLength 1000');
    expect((await raw.next())!.header).toMatchObject({ id: 3, ok: true, op: 'ping' });
  });

  it('answers an oversized frameLength and closes only that connection', async () => {
    const huge = Buffer.alloc(8);
    huge.writeUInt32LE(0xffffffff, 0);
    raw.write(huge);
    const err = errorOf(await raw.next());
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain('exceeds the limit');
    await raw.waitClosed();
    const hello = await client.hello();
    expect(hello.pid).toBe(sidecar.pid);
  });

  it('times out a frame that stalls half-way and keeps serving others', async () => {
    const partial = Buffer.alloc(8 + 3);
    partial.writeUInt32LE(100, 0);
    partial.writeUInt32LE(20, 4);
    const t0 = Date.now();
    raw.write(partial);
    const err = errorOf(await raw.next(5000));
    const elapsed = Date.now() - t0;
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toContain('stalled');
    expect(elapsed).toBeGreaterThanOrEqual(350);
    expect(elapsed).toBeLessThan(3000);
    await raw.waitClosed();
    await expect(client.ping()).resolves.toBeUndefined();
  });
});

describe('ops and arguments', () => {
  it('rejects an unknown op with UNKNOWN_OP listing the known ones', async () => {
    const err = await client.request('allreduce_please', {}).catch((e) => e);
    expect(err).toBeInstanceOf(SidecarProtocolError);
    expect(err.sidecarCode).toBe('UNKNOWN_OP');
    expect(err.message).toContain("unknown op 'allreduce_please'");
    expect(err.message).toContain('collective');
    await expect(client.ping()).resolves.toBeUndefined();
  });

  it('rejects bad fields with INVALID_ARGUMENT naming the field', async () => {
    const err = await client.request('ping', { delayMs: 'soon' }).catch((e) => e);
    expect(err).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(err.message).toContain("'delayMs'");
    const neg = await client.request('ping', { delayMs: -1 }).catch((e) => e);
    expect(neg).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(neg.message).toContain('outside');
  });
});

describe('timeouts', () => {
  it('honours a request timeout: a long ping fails TIMEOUT at the deadline and the sidecar stays free', async () => {
    const t0 = Date.now();
    const err = await client.ping(5000, 300).catch((e) => e);
    const elapsed = Date.now() - t0;
    expect(err).toBeInstanceOf(SidecarTimeoutError);
    expect(err.sidecarCode).toBe('TIMEOUT');
    expect(err.message).toContain('timeout of 300 ms');
    expect(elapsed).toBeGreaterThanOrEqual(280);
    expect(elapsed).toBeLessThan(2500);
    const t1 = Date.now();
    await client.ping();
    expect(Date.now() - t1).toBeLessThan(1000);
  });

  it('fails a request that expires while queued behind a slow one', async () => {
    const other = await SidecarClient.connect(sidecar.socketPath);
    try {
      const slow = client.ping(800, 5000);
      await new Promise((r) => setTimeout(r, 100));
      const err = await other.ping(0, 200).catch((e) => e);
      expect(err).toBeInstanceOf(SidecarTimeoutError);
      expect(err.message).toContain('expired while queued');
      await expect(slow).resolves.toBeUndefined();
    } finally {
      other.close();
    }
  });

  it('times out on the client side when the peer never answers', async () => {
    const silentPath = path.join(dir, 'silent.sock');
    const accepted: net.Socket[] = [];
    const server = net.createServer((s) => accepted.push(s));
    await new Promise<void>((r) => server.listen(silentPath, r));
    try {
      const c = await SidecarClient.connect(silentPath, { marginMs: 100 });
      const t0 = Date.now();
      const err = await c.ping(0, 150).catch((e) => e);
      expect(err).toBeInstanceOf(SidecarTimeoutError);
      expect(err.message).toContain('no reply within 150 ms');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(240);
      c.close();
    } finally {
      accepted.forEach((s) => s.destroy());
      await new Promise((r) => server.close(r));
    }
  });
});

describe('process lifecycle', () => {
  it('fails pending requests with a connection error when the sidecar goes away, and exits 0 on shutdown', async () => {
    const proc = await spawnSidecar({ binary, socketPath: path.join(dir, 'shutdown.sock'), ncclLib: MISSING_NCCL });
    extraProcs.push(proc);
    const a = await SidecarClient.connect(proc.socketPath);
    const b = await SidecarClient.connect(proc.socketPath);
    const pending = a.ping(10_000, 20_000).catch((e) => e);
    await new Promise((r) => setTimeout(r, 100));
    await b.shutdown();
    const exit = await proc.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(fs.existsSync(proc.socketPath)).toBe(false);
    const err = await pending;
    expect(err).toBeInstanceOf(SidecarConnectionError);
    a.close();
    b.close();
  });

  it('stops on SIGTERM by pid and removes its socket; refuses a socket another sidecar serves', async () => {
    const sock = path.join(dir, 'term.sock');
    const proc = await spawnSidecar({ binary, socketPath: sock, ncclLib: MISSING_NCCL });
    extraProcs.push(proc);
    const dup = await spawnSidecar({ binary, socketPath: sock, ncclLib: MISSING_NCCL }).catch((e) => e);
    expect(dup).toBeInstanceOf(SidecarConnectionError);
    expect(dup.message).toContain('another process is serving');
    expect(fs.existsSync(sock)).toBe(true);
    const exit = await proc.stop();
    expect(exit.code).toBe(0);
    expect(isAlive(proc.pid)).toBe(false);
    expect(fs.existsSync(sock)).toBe(false);
  });
});
