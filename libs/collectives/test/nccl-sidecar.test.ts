// The sidecar's protocol (2: binary headers) against the real binary, on a machine without a GPU
// or NCCL: hello says why NCCL is unavailable, bad frames get error frames while the sidecar keeps
// serving, unknown ops and bad fields are typed errors naming the field, and timeouts are honoured.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { isAlive, buildSidecar } from '@cmesh/testing';

import {
  encodeRequest,
  FrameDecoder,
  Frame,
  RequestHeader,
  REQUEST_HEADER_BYTES,
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

/** A request frame; `patch` edits the header bytes (offsets: README "Request header"). */
function rawFrame(header: RequestHeader, payload?: Buffer, patch?: (h: Buffer) => void): Buffer {
  const bytes = encodeRequest(header, payload);
  patch?.(bytes.subarray(0, REQUEST_HEADER_BYTES));
  return bytes;
}

function errorOf(f: Frame | null): { code: string; message: string } {
  expect(f).not.toBeNull();
  expect(f!.ok).toBe(false);
  return f!.error!;
}

beforeAll(async () => {
  binary = buildSidecar();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-sidecar-test-'));
  sidecar = await spawnSidecar({
    binary,
    socketPath: path.join(dir, 'main.sock'),
    ncclLib: MISSING_NCCL,
    stallTimeoutMs: 400,
    maxFrameBytes: 1 << 20,
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
    expect(hello.protocol).toBe(2);
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
    const init = await client.commInitRank({ nranks: 2, rank: 0, uniqueId: '0'.repeat(256), device: 0 }).catch((e) => e);
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

  it('answers a frame that is not a request header (e.g. protocol 1 JSON) with BAD_FRAME and closes only that connection', async () => {
    const json = Buffer.from('{"id": 1, "op": "hello"}'.padEnd(REQUEST_HEADER_BYTES, ' '), 'utf8');
    const old = Buffer.alloc(8);
    old.writeUInt32LE(4 + json.length, 0);
    old.writeUInt32LE(json.length, 4);
    raw.write(Buffer.concat([old, json]));
    const err = errorOf(await raw.next());
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain('bad magic');
    await raw.waitClosed();
    expect((await client.hello()).pid).toBe(sidecar.pid);
  });

  it('answers another protocol version with BAD_FRAME naming the version, and closes', async () => {
    raw.write(rawFrame({ id: 1, op: 'hello' }, undefined, (h) => h.writeUInt16LE(1, 4)));
    const err = errorOf(await raw.next());
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain("'version' = 1");
    expect(err.message).toContain('protocol version 2');
    await raw.waitClosed();
  });

  it('answers invalid headers with typed errors naming the field and keeps the connection', async () => {
    raw.write(rawFrame({ id: 1, op: 'hello' }, undefined, (h) => h.writeUInt8(1, 14)));
    const reserved = await raw.next();
    expect(errorOf(reserved).code).toBe('BAD_FRAME');
    expect(errorOf(reserved).message).toContain('reserved header byte 14');
    expect(reserved!.id).toBe(null);
    raw.write(rawFrame({ id: 8, op: 'hello' }, undefined, (h) => h.writeBigUInt64LE(2n ** 53n, 16)));
    const bigId = await raw.next();
    expect(errorOf(bigId).code).toBe('BAD_FRAME');
    expect(errorOf(bigId).message).toContain("'id'");
    raw.write(rawFrame({ id: 9, op: 'collective', comm: 1, iters: 1 }, undefined, (h) => h.writeUInt8(42, 10)));
    const dtype = await raw.next();
    expect(dtype!.id).toBe(9);
    expect(dtype!.op).toBe('collective');
    expect(errorOf(dtype).code).toBe('INVALID_ARGUMENT');
    expect(errorOf(dtype).message).toContain("field 'dtype': unknown dtype code 42");
    raw.write(rawFrame({ id: 10, op: 'ping' }));
    expect(await raw.next()).toMatchObject({ id: 10, ok: true, op: 'ping' });
  });

  it("skips an invalid frame's payload and keeps the connection", async () => {
    // copyIn of 4 float32 (16 bytes) with a 1000-byte payload: rejected, the payload swallowed.
    const bad = rawFrame({ id: 3, op: 'copyIn', buf: 1, dtype: 'float32', count: 4 }, Buffer.alloc(1000, 7));
    raw.write(Buffer.concat([bad, rawFrame({ id: 4, op: 'ping' })]));
    const err = await raw.next();
    expect(err!.id).toBe(3);
    expect(errorOf(err).code).toBe('INVALID_ARGUMENT');
    expect(errorOf(err).message).toContain("field 'payloadLength' = 1000 does not match count × element size = 16");
    expect(await raw.next()).toMatchObject({ id: 4, ok: true, op: 'ping' });
  });

  it('refuses an oversized frame by id, drops its payload and keeps the connection', async () => {
    const big = 2 << 20; // over the 1 MiB limit
    raw.write(Buffer.concat([rawFrame({ id: 5, op: 'copyIn', buf: 1, count: big }, Buffer.alloc(big, 1)), rawFrame({ id: 6, op: 'ping' })]));
    const reply = await raw.next(5000);
    expect(reply!.id).toBe(5);
    const err = errorOf(reply);
    expect(err.code).toBe('BAD_FRAME');
    expect(err.message).toContain('exceeds the limit of 1048576 bytes');
    expect(await raw.next()).toMatchObject({ id: 6, ok: true, op: 'ping' });
  });

  it('times out a frame that stalls half-way and keeps serving others', async () => {
    const partial = rawFrame({ id: 6, op: 'ping' }).subarray(0, 11);
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
  it('rejects an unknown op code with UNKNOWN_OP listing the known ones', async () => {
    const err = await client.request(999).catch((e) => e);
    expect(err).toBeInstanceOf(SidecarProtocolError);
    expect(err.sidecarCode).toBe('UNKNOWN_OP');
    expect(err.message).toContain('unknown op 999');
    expect(err.message).toContain('11 collective');
    await expect(client.ping()).resolves.toBeUndefined();
  });

  it('rejects bad fields with INVALID_ARGUMENT naming the field', async () => {
    const big = await client.request('ping', { delayMs: 4_000_000_000 }).catch((e) => e);
    expect(big).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(big.message).toContain("'delayMs'");
    expect(big.message).toContain('outside');
    // a value the header cannot carry is refused before anything is sent
    const neg = await client.request('ping', { delayMs: -1 }).catch((e) => e);
    expect(neg).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(neg.message).toContain("'delayMs'");
    // 2^61 float64 elements = 2^64 bytes: an overflow, not an empty copy
    const overflow = await client.request('collective', { comm: 1, collective: 'allReduce', dtype: 'float64', count: 2n ** 61n, iters: 1 }).catch((e) => e);
    expect(overflow).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(overflow.message).toContain("field 'count'");
    const iters = await client.request('collective', { comm: 1, collective: 'allReduce', count: 4 }).catch((e) => e);
    expect(iters).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(iters.message).toContain("field 'iters' = 0");
    const uid = await client.commInitRank({ nranks: 2, rank: 0, uniqueId: 'abc', device: 0 }).catch((e) => e);
    expect(uid).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(uid.message).toContain("'uniqueId'");
    const rank = await client.commInitRank({ nranks: 2, rank: 2, uniqueId: '0'.repeat(256), device: 0 }).catch((e) => e);
    expect(rank).toBeInstanceOf(SidecarInvalidArgumentError);
    expect(rank.message).toContain("field 'rank' = 2 is outside [0, 1]");
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

  it('fails a request that expires while queued behind a slow one of its connection; other connections do not wait', async () => {
    const other = await SidecarClient.connect(sidecar.socketPath);
    try {
      const slow = client.ping(800, 5000);
      await new Promise((r) => setTimeout(r, 100));
      const queued = client.ping(0, 200).catch((e) => e);
      // Connections have executors of their own: another client's request runs at once.
      const t0 = Date.now();
      await other.ping(0, 200);
      expect(Date.now() - t0).toBeLessThan(200);
      const err = await queued;
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
