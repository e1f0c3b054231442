// Fuzzing the NCCL sidecar through its Unix socket, over the CPU simulation of CUDA and NCCL
// (native/nccl-sim): well-framed requests of every op but shutdown with random fields, codes,
// timeouts and payloads (matching their length or not), many per connection, and a last frame that
// may end the connection (bad magic, version or header length, flipped header bytes, payloads
// over the limit, headers cut short, random bytes). CMESH_FUZZ_RUNS cases (default 10000; seed
// printed). Checked: every well-framed request gets a reply with its id and a typed status (never
// INTERNAL), the sidecar stays alive, a fixture buffer of another connection is untouched, and
// once the fuzzing connections are gone the sidecar holds exactly the fixture's resources again.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import fc from 'fast-check';
import { fuzzPlan, runFuzz, buildSidecar } from '@cmesh/testing';
import {
  Frame,
  FrameDecoder,
  REQUEST_HEADER_BYTES,
  RequestHeader,
  encodeRequest,
  REQUEST_MAGIC,
  SIDECAR_BUILD_DIR,
  SIDECAR_ERROR_NAMES,
  SidecarClient,
  SidecarProcess,
  spawnSidecar,
} from '../src/backends/nccl';

const SIM_DIR = path.join(SIDECAR_BUILD_DIR, 'nccl-sim');
/** Small, so that oversized frames are cheap to make and device memory is bounded. */
const MAX_FRAME_BYTES = 1 << 20;
const SIM_ENV = { CMESH_SIM_DEVICES: '2', CMESH_SIM_DEVICE_MEMORY: String(256 << 20), CMESH_SIM_HANG_MS: '20000' };

interface Req {
  what: string;
  bytes: Buffer;
  id?: number;
}

/** What a connection made before its cases: a communicator of one rank and two 256-byte buffers. */
interface Ctx {
  comm: number;
  bufs: [number, number];
}
const BUF_BYTES = 256;

const U64 = fc.oneof(
  { arbitrary: fc.bigInt({ min: 0n, max: 4n }), weight: 6 },
  { arbitrary: fc.constantFrom(2n ** 48n, 2n ** 48n + 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 1n << 20n), weight: 2 },
  { arbitrary: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), weight: 2 },
);
const U32 = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 4 }), weight: 6 },
  { arbitrary: fc.constantFrom(0xffffffff, 1 << 20, (1 << 20) + 1, 1_000_001, 256), weight: 2 },
  { arbitrary: fc.nat({ max: 0xffffffff }), weight: 2 },
);
/** every op but shutdown (3), and unknown ones */
const OP = fc.oneof(
  { arbitrary: fc.constantFrom(1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14), weight: 9 },
  { arbitrary: fc.integer({ min: 15, max: 0xffff }), weight: 1 },
  { arbitrary: fc.constant(0), weight: 1 },
);

/** A request header up to its op-specific fields (from byte 32): magic, version, op, codes, id, timeout. */
function headerOf(r: { op: number; dtype: number; redOp: number; collective: number; timeoutMs: number }, id: number): Buffer {
  const h = Buffer.alloc(REQUEST_HEADER_BYTES);
  h.writeUInt32LE(REQUEST_MAGIC, 0);
  h.writeUInt16LE(2, 4);
  h.writeUInt16LE(REQUEST_HEADER_BYTES, 6);
  h.writeUInt16LE(r.op, 8);
  h.writeUInt8(r.dtype, 10);
  h.writeUInt8(r.redOp, 11);
  h.writeUInt8(r.collective, 12);
  h.writeBigUInt64LE(BigInt(id), 16);
  h.writeUInt32LE(r.timeoutMs, 24);
  return h;
}

/** A well-framed request: a valid header (magic, version, length, reserved bytes) with random contents. */
const randomRequest = fc
  .record({
    op: OP,
    dtype: fc.oneof({ arbitrary: fc.integer({ min: 0, max: 9 }), weight: 4 }, { arbitrary: fc.integer({ min: 10, max: 255 }), weight: 1 }),
    redOp: fc.oneof({ arbitrary: fc.integer({ min: 0, max: 4 }), weight: 4 }, { arbitrary: fc.integer({ min: 5, max: 255 }), weight: 1 }),
    collective: fc.oneof({ arbitrary: fc.integer({ min: 0, max: 10 }), weight: 4 }, { arbitrary: fc.integer({ min: 11, max: 255 }), weight: 1 }),
    // short deadlines: a request that waits (an init without peers) ends soon
    timeoutMs: fc.integer({ min: 1, max: 20 }),
    u64s: fc.array(U64, { minLength: 7, maxLength: 7 }),
    u32s: fc.array(U32, { minLength: 4, maxLength: 4 }),
    peers: fc.array(
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((v) => (v % 3 === 0 ? -1 : v)),
      { minLength: 2, maxLength: 2 },
    ),
    tail: fc.array(U32, { minLength: 4, maxLength: 4 }),
    payload: fc.oneof({ arbitrary: fc.uint8Array({ maxLength: 300 }), weight: 8 }, { arbitrary: fc.constant(new Uint8Array(128)), weight: 1 }),
    lengthOff: fc.oneof({ arbitrary: fc.constant(0), weight: 5 }, { arbitrary: fc.integer({ min: -4, max: 4 }), weight: 1 }),
  })
  .map((r) => (id: number): Req => {
    const h = headerOf(r, id);
    r.u64s.forEach((v, i) => h.writeBigUInt64LE(v, 32 + 8 * i));
    r.u32s.forEach((v, i) => h.writeUInt32LE(v, 88 + 4 * i));
    r.peers.forEach((v, i) => h.writeInt32LE(v, 104 + 4 * i));
    // warmup, iters, value, delayMs: delays kept short (the GPU thread serves every connection)
    r.tail.forEach((v, i) => h.writeUInt32LE(i === 3 && v <= 0xffff ? v % 20 : v, 112 + 4 * i));
    // a payload length that is off by a few bytes is sent as announced: the frame stays framed
    const len = Math.max(0, r.payload.length + r.lengthOff);
    h.writeUInt32LE(len, 28);
    const payload = Buffer.alloc(len);
    payload.set(r.payload.subarray(0, len));
    return { what: `op ${r.op} (payload ${len})`, bytes: Buffer.concat([h, payload]), id };
  });

/** Sizes around the connection's buffers and past any: extents must be checked, never trusted. */
const SIZE = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: BUF_BYTES + 8 }).map(BigInt), weight: 6 },
  { arbitrary: fc.constantFrom(1n, 2n, 4n, 8n, 64n, 128n, 255n, 256n, 257n, 2n ** 32n, 2n ** 48n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n - 256n), weight: 3 },
);

/** A request on the connection's own communicator and buffers, with sizes near and past their ends. */
const plausibleRequest = fc
  .record({
    op: fc.constantFrom(2, 6, 7, 8, 9, 10, 11, 11, 11, 11, 12, 13, 14),
    dtype: fc.integer({ min: 0, max: 9 }),
    redOp: fc.integer({ min: 0, max: 4 }),
    collective: fc.integer({ min: 0, max: 10 }),
    timeoutMs: fc.integer({ min: 5, max: 50 }),
    comm: fc.oneof({ arbitrary: fc.constant(-1), weight: 8 }, { arbitrary: fc.nat({ max: 1000 }), weight: 1 }),
    buf: fc.integer({ min: -2, max: 3 }),
    sendBuf: fc.integer({ min: -2, max: 3 }),
    recvBuf: fc.integer({ min: -2, max: 3 }),
    count: SIZE,
    offset: SIZE,
    recvOffset: SIZE,
    nranks: fc.integer({ min: 0, max: 3 }),
    rank: fc.integer({ min: 0, max: 2 }),
    device: fc.integer({ min: 0, max: 3 }),
    root: fc.integer({ min: 0, max: 2 }),
    sendPeer: fc.integer({ min: -1, max: 2 }),
    recvPeer: fc.integer({ min: -1, max: 2 }),
    warmup: fc.integer({ min: 0, max: 2 }),
    iters: fc.integer({ min: 0, max: 3 }),
    value: fc.integer({ min: 0, max: 300 }),
    payload: fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: BUF_BYTES + 16 })),
  })
  .map((r) => (id: number, ctx: Ctx): Req => {
    const handle = (k: number) => (k === -2 ? 999_999 : k < 0 ? 0 : k === 0 ? 0 : ctx.bufs[(k - 1) % 2]);
    const h = headerOf(r, id);
    h.writeBigUInt64LE(BigInt(r.comm < 0 ? ctx.comm : r.comm), 32);
    h.writeBigUInt64LE(BigInt(handle(r.buf)), 40);
    h.writeBigUInt64LE(r.count, 48);
    h.writeBigUInt64LE(r.offset, 56);
    h.writeBigUInt64LE(r.recvOffset, 64);
    h.writeBigUInt64LE(BigInt(handle(r.sendBuf)), 72);
    h.writeBigUInt64LE(BigInt(handle(r.recvBuf)), 80);
    [r.nranks, r.rank, r.device, r.root].forEach((v, i) => h.writeUInt32LE(v, 88 + 4 * i));
    h.writeInt32LE(r.sendPeer, 104);
    h.writeInt32LE(r.recvPeer, 108);
    [r.warmup, r.iters, r.value, 0].forEach((v, i) => h.writeUInt32LE(v, 112 + 4 * i));
    // copyIn's payload: count bytes as it should, or another length
    const len = r.payload < 0 ? (r.op === 9 && r.count <= BigInt(BUF_BYTES) * 8n ? Number(r.count) : 0) : r.payload;
    h.writeUInt32LE(len, 28);
    return {
      what: `op ${r.op} on the connection's handles (count ${r.count}, offset ${r.offset}, payload ${len})`,
      bytes: Buffer.concat([h, Buffer.alloc(len, 0x5a)]),
      id,
    };
  });

const request: fc.Arbitrary<(id: number, ctx: Ctx) => Req> = fc.oneof(
  randomRequest.map((mk) => (id: number) => mk(id)),
  plausibleRequest,
);

/** A last frame after which the sidecar may close the connection. */
const terminal: fc.Arbitrary<(id: number) => Req> = fc.oneof(
  fc.tuple(randomRequest, fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 255 })).map(([mk, at, v]) => (id: number) => {
    const r = mk(id);
    r.bytes[at] = r.bytes[at] === v ? v ^ 0xff : v; // magic, version or header length broken
    return { what: `header byte ${at} = ${r.bytes[at]}`, bytes: r.bytes };
  }),
  fc
    .tuple(randomRequest, fc.array(fc.tuple(fc.integer({ min: 8, max: 127 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }))
    .map(([mk, flips]) => (id: number) => {
      const r = mk(id);
      for (const [at, v] of flips) r.bytes[at] = v;
      return { what: `header bytes ${flips.map(([a]) => a).join(',')} changed`, bytes: r.bytes };
    }),
  fc.tuple(randomRequest, fc.integer({ min: MAX_FRAME_BYTES - REQUEST_HEADER_BYTES + 1, max: 0xffffffff })).map(([mk, len]) => (id: number) => {
    const r = mk(id);
    r.bytes.writeUInt32LE(len, 28);
    return { what: `payload of ${len} bytes announced, over the limit, not sent`, bytes: r.bytes.subarray(0, REQUEST_HEADER_BYTES) };
  }),
  fc
    .tuple(randomRequest, fc.integer({ min: 1, max: REQUEST_HEADER_BYTES - 1 }))
    .map(([mk, n]) => (id: number) => ({ what: `${n} bytes of a header`, bytes: mk(id).bytes.subarray(0, n) })),
  fc.uint8Array({ minLength: 1, maxLength: 400 }).map((b) => () => ({ what: 'random bytes', bytes: Buffer.from(b) })),
);

let dir: string;
let sidecar: SidecarProcess;
let fixture: SidecarClient;
let fixtureBuf: number;
const FIXTURE_BYTES = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 7) & 0xff));
const stderr: string[] = [];
/** replies by status, printed: shows the cases reach past validation */
const tally: Record<string, number> = {};

async function resources(): Promise<unknown> {
  return (await fixture.hello()).resources;
}

let nextId = 1;

async function runConnection(mks: Array<(id: number, ctx: Ctx) => Req>, mkLast: ((id: number) => Req) | null): Promise<string[]> {
  const problems: string[] = [];
  const logged = stderr.length;
  const sock = net.createConnection({ path: sidecar.socketPath });
  sock.on('error', () => {});
  await new Promise<void>((r, j) => {
    sock.once('connect', r);
    sock.once('error', j);
  });
  const decoder = new FrameDecoder();
  const replies = new Map<number, string>();
  const frames = new Map<number, Frame>();
  let wake = () => {};
  let undecodable = '';
  const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
  sock.on('data', (d: Buffer) => {
    try {
      for (const f of decoder.push(d)) {
        if (f.id === null) continue;
        replies.set(f.id, f.ok ? 'OK' : f.error!.code);
        frames.set(f.id, f);
      }
    } catch (e) {
      undecodable = (e as Error).message;
    }
    wake();
  });
  void closed.then(() => wake());
  const call = async (header: Omit<RequestHeader, 'id'>, payload?: Buffer) => {
    const id = nextId++;
    sock.write(encodeRequest({ ...header, id }, payload));
    while (!frames.has(id) && !sock.destroyed) await new Promise<void>((r) => (wake = r));
    const f = frames.get(id);
    if (!f?.ok) throw new Error(`setup ${String(header.op)}: ${f?.error?.code ?? 'closed'} ${f?.error?.message ?? ''}`);
    return f.result;
  };
  const uid = String((await call({ op: 'getUniqueId', timeoutMs: 5000 })).uniqueId);
  const ctx: Ctx = {
    comm: Number((await call({ op: 'commInitRank', nranks: 1, rank: 0, device: 0, timeoutMs: 5000 }, Buffer.from(uid, 'hex'))).comm),
    bufs: [
      Number((await call({ op: 'alloc', device: 0, count: BUF_BYTES, timeoutMs: 5000 })).buf),
      Number((await call({ op: 'alloc', device: 0, count: BUF_BYTES, timeoutMs: 5000 })).buf),
    ],
  };
  const reqs = mks.map((mk) => mk(nextId++, ctx));
  const last = mkLast ? mkLast(nextId++) : null;
  const all = new Promise<void>((resolve) => {
    const check = () => {
      if (reqs.every((r) => replies.has(r.id!)) || sock.destroyed) resolve();
      else wake = check;
    };
    check();
  });
  sock.write(Buffer.concat([...reqs.map((r) => r.bytes), ...(last ? [last.bytes] : [])]));
  const timer = setTimeout(() => sock.destroy(), 30_000);
  await all;
  clearTimeout(timer);
  sock.destroy();
  await closed;
  if (undecodable) problems.push(`a reply that does not decode: ${undecodable}`);
  // what the sidecar logged meanwhile says why a connection ended early (a stalled frame, say)
  if (reqs.some((r) => !replies.has(r.id!))) problems.push(`the sidecar's log meanwhile: ${stderr.slice(logged).slice(-10).join(' | ') || '(nothing)'}`);
  for (const r of reqs) {
    const code = replies.get(r.id!);
    if (code === undefined) problems.push(`${r.what}: no reply${last ? ` (last frame: ${last.what})` : ''}`);
    else if (code === 'INTERNAL' || !(SIDECAR_ERROR_NAMES as readonly string[]).includes(code)) problems.push(`${r.what}: ${code}`);
    if (code !== undefined) tally[code] = (tally[code] ?? 0) + 1;
  }
  return problems;
}

beforeAll(async () => {
  const binary = buildSidecar();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-fuzz-sidecar-'));
  sidecar = await spawnSidecar({
    binary,
    socketPath: path.join(dir, 'sidecar.sock'),
    ncclLib: path.join(SIM_DIR, 'libcmesh-sim-nccl.so'),
    cudartLib: path.join(SIM_DIR, 'libcmesh-sim-cudart.so'),
    maxFrameBytes: MAX_FRAME_BYTES,
    stallTimeoutMs: 2000,
    env: { ...process.env, ...SIM_ENV },
    onStderr: (l) => stderr.push(l),
  });
  fixture = await SidecarClient.connect(sidecar.socketPath, { marginMs: 3000 });
  fixtureBuf = await fixture.alloc(0, FIXTURE_BYTES.length);
  await fixture.copyIn(fixtureBuf, FIXTURE_BYTES);
}, 360_000);

afterAll(async () => {
  fixture?.close();
  await sidecar?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

it('NCCL sidecar: random, malformed, truncated and oversized frames on its socket', async () => {
  const BATCH = 25;
  const plan = fuzzPlan('nccl sidecar frames', BATCH);
  const before = await resources();
  const started = Date.now();
  const problems = await runFuzz(
    plan,
    fc.tuple(fc.array(request, { minLength: BATCH - 1, maxLength: BATCH - 1 }), fc.option(terminal, { freq: 3 })),
    async ([mks, last]) => {
      const p = await runConnection(mks, last);
      if (!sidecar.running) p.push(`the sidecar exited: ${stderr.slice(-20).join('\n')}`);
      return p;
    },
  );
  expect(problems.slice(0, 20)).toEqual([]);
  expect(sidecar.running).toBe(true);
  // the fixture's buffer is untouched, and what the fuzzing connections made is gone with them
  expect(Buffer.compare(await fixture.copyOut(fixtureBuf, FIXTURE_BYTES.length), FIXTURE_BYTES)).toBe(0);
  const deadline = Date.now() + 10_000;
  let after = await resources();
  while (JSON.stringify(after) !== JSON.stringify(before) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    after = await resources();
  }
  expect(after).toEqual(before);
  await fixture.ping();
  process.stdout.write(`fuzz nccl sidecar frames: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s; replies ${JSON.stringify(tally)}\n`);
}, 300_000);

it('NCCL sidecar: payloads announced and not sent hold no memory', async () => {
  // the default frame limit (1 GiB + 1 MiB): each connection announces a 256 MiB copyIn payload,
  // sends 1 KiB of it and stops; the sidecar must not have allocated the rest
  const other = await spawnSidecar({
    binary: buildSidecar(),
    socketPath: path.join(dir, 'default-limits.sock'),
    ncclLib: path.join(SIM_DIR, 'libcmesh-sim-nccl.so'),
    cudartLib: path.join(SIM_DIR, 'libcmesh-sim-cudart.so'),
    env: { ...process.env, ...SIM_ENV },
  });
  const socks: net.Socket[] = [];
  try {
    const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${other.pid}/status`, 'utf8'))![1]) * 1024;
    const base = rss();
    for (let i = 0; i < 4; i++) {
      const s = net.createConnection({ path: other.socketPath });
      s.on('error', () => {});
      await new Promise<void>((r) => s.once('connect', () => r()));
      const frame = encodeRequest({ op: 'copyIn', id: i + 1, buf: 1, count: 256 << 20, timeoutMs: 1000 }, Buffer.alloc(1024));
      frame.writeUInt32LE(256 << 20, 28); // the payload announced: 256 MiB
      s.write(frame);
      socks.push(s);
    }
    await new Promise((r) => setTimeout(r, 1000));
    const grown = rss() - base;
    expect(grown).toBeLessThan(64 << 20);
    process.stdout.write(`nccl sidecar: 4 connections announcing 256 MiB payloads grew its RSS by ${(grown / 2 ** 20).toFixed(1)} MiB\n`);
    for (const s of socks) s.destroy();
    const c = await SidecarClient.connect(other.socketPath);
    await c.ping();
    c.close();
    expect(other.running).toBe(true);
  } finally {
    for (const s of socks) s.destroy();
    await other.stop();
  }
}, 360_000);
