// Fuzzing the data plane: the test is rank 1 of a world of 2 whose rank 0 runs in its own process
// (fuzz/target.ts: a new Mesh each round, echoing P2P group 7 tag 7 messages of 16 bytes back on
// tag 8). Each round it may first connect with hellos that are not rank 1 (refused: the socket is
// closed and the mesh still waits for rank 1), then connects as rank 1 and sends collective and
// P2P frames of random groups, tags, signatures and lengths, echo requests (valid and of the wrong
// length), aborts and byes, and ends with a clean close or with a frame that breaks the protocol
// (unknown kinds, control frames too long, aborts that are not JSON notices, headers announcing up
// to 4 GiB then cut short, random bytes). CMESH_FUZZ_RUNS cases (default 10000; seed printed).
// Checked: every valid echo comes back in order, rank 0 names rank 1 in a PeerFailureError when the
// round ends (saying how it broke the protocol, where it did), the process never crashes and its
// peak memory stays bounded (a header's length alone never makes it allocate).
import * as net from 'net';
import fc from 'fast-check';
import { fuzzPlan, runFuzz } from '@cmesh/testing';
import { PrefixStore, TcpStore, TcpStoreServer, startTcpStoreServer } from '../src/store';
import { FrameKind, HEADER_BYTES, NO_SIGNATURE, OpSignature, readHeader, writeHeader } from '../src/transport/frame';
import { TargetProcess, startTarget } from './fuzz/target-process';

interface Case {
  what: string;
  bytes: Buffer;
  /** the 16 bytes rank 0 must echo back */
  echo?: Buffer;
}

/** How a round ends, and what rank 0's error must say. */
interface Ending {
  what: string;
  bytes: Buffer;
  error: RegExp;
}

const frame = (kind: number, group: number, tag: number, sig: OpSignature, payload: Uint8Array, length = payload.length) => {
  const h = writeHeader(Buffer.alloc(HEADER_BYTES), kind, group, tag, sig, length);
  h[0] = kind; // kinds outside the enum too
  return Buffer.concat([h, payload]);
};

const sig: fc.Arbitrary<OpSignature> = fc.record({
  opcode: fc.integer({ min: 0, max: 255 }),
  dtype: fc.integer({ min: 0, max: 255 }),
  root: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  count: fc.oneof(fc.nat(), fc.constant(0xffffffff)),
});
const u32 = fc.oneof(fc.integer({ min: 0, max: 16 }), fc.constant(7), fc.constant(0xffffffff), fc.nat({ max: 0xffffffff }));
const payload = fc.oneof(
  { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 8 },
  { arbitrary: fc.uint8Array({ minLength: 64 * 1024, maxLength: 200 * 1024 }), weight: 1 },
);

const body: fc.Arbitrary<Case> = fc.oneof(
  {
    arbitrary: fc
      .uint8Array({ minLength: 16, maxLength: 16 })
      .map((b) => ({ what: 'echo', bytes: frame(FrameKind.P2P, 7, 7, NO_SIGNATURE, b), echo: Buffer.from(b) })),
    weight: 4,
  },
  {
    arbitrary: fc
      .uint8Array({ maxLength: 40 })
      .filter((b) => b.length !== 16)
      .map((b) => ({ what: `echo of ${b.length} bytes`, bytes: frame(FrameKind.P2P, 7, 7, NO_SIGNATURE, b) })),
    weight: 1,
  },
  {
    arbitrary: fc
      .tuple(fc.constantFrom(FrameKind.Collective, FrameKind.P2P), u32, u32, sig, payload)
      .filter(([, g, t]) => !(g === 7 && t === 7))
      .map(([k, g, t, s, p]) => ({ what: `kind ${k} group ${g} tag ${t} ${p.length} bytes`, bytes: frame(k, g, t, s, p) })),
    weight: 6,
  },
  {
    arbitrary: fc
      .tuple(u32, u32, fc.integer({ min: -1, max: 5 }), fc.string({ maxLength: 100 }), fc.constantFrom('peer', 'mismatch', 'timeout', 'error', 'other'))
      .map(([g, t, failedRank, message, reason]) => ({
        what: 'abort notice',
        bytes: frame(FrameKind.Abort, g, t, NO_SIGNATURE, Buffer.from(JSON.stringify({ failedRank, message, reason }))),
      })),
    weight: 2,
  },
);

const broke = /^PeerFailureError: rank 1 broke the data-plane protocol \(.+\); its connection was closed/;
const gone = /^PeerFailureError: rank 1 died or closed its connection/;
const overBytes =
  /^PeerFailureError: rank 1 (died or closed its connection|broke the data-plane protocol \(sent \d+ bytes nobody had asked for yet, more than 4294967296 \(CMESH_MAX_UNEXPECTED_BYTES\)\); its connection was closed)/;
const ending: fc.Arbitrary<Ending> = fc.oneof(
  fc.constant({ what: 'clean close', bytes: Buffer.alloc(0), error: gone }),
  fc.constant({
    what: 'bye, then close',
    bytes: frame(FrameKind.Bye, 0, 0, NO_SIGNATURE, new Uint8Array(0)),
    error: /^PeerFailureError: rank 1 has destroyed its process group/,
  }),
  fc
    .tuple(
      fc.integer({ min: 0, max: 255 }).filter((k) => k < 1 || k > 4),
      u32,
      u32,
      fc.uint8Array({ maxLength: 32 }),
    )
    .map(([k, g, t, p]) => ({ what: `unknown kind ${k}`, bytes: frame(k, g, t, NO_SIGNATURE, p), error: broke })),
  fc
    .tuple(fc.integer({ min: 1, max: 0xffffffff }), fc.uint8Array({ maxLength: 32 }))
    .map(([len, p]) => ({ what: `bye of ${len} bytes`, bytes: frame(FrameKind.Bye, 0, 0, NO_SIGNATURE, p, len), error: broke })),
  fc
    .tuple(fc.integer({ min: 64 * 1024 + 1, max: 0xffffffff }), fc.uint8Array({ maxLength: 32 }))
    .map(([len, p]) => ({ what: `abort of ${len} bytes`, bytes: frame(FrameKind.Abort, 1, 1, NO_SIGNATURE, p, len), error: broke })),
  fc
    .oneof(
      fc.uint8Array({ maxLength: 64 }),
      fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'x')),
      fc.constant(Buffer.from('{"failedRank":"x","message":1}')),
    )
    .map((p) => ({ what: 'abort that is not a notice', bytes: frame(FrameKind.Abort, 1, 1, NO_SIGNATURE, p), error: broke })),
  fc
    .tuple(fc.constantFrom(FrameKind.Collective, FrameKind.P2P), fc.integer({ min: 1 << 20, max: 0xffffffff }), fc.integer({ min: 0, max: 8192 }))
    .map(([k, len, sent]) => ({
      what: `kind ${k} announcing ${len} bytes, cut short after ${sent}`,
      bytes: frame(k, 3, 3, NO_SIGNATURE, new Uint8Array(sent), len),
      // with what the round buffered before, a header of almost 4 GiB can pass rank 0's bound on unclaimed bytes
      error: overBytes,
    })),
  fc.integer({ min: 1, max: HEADER_BYTES - 1 }).map((n) => ({ what: `${n} bytes of a header`, bytes: Buffer.alloc(n, 1), error: gone })),
  fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => ({ what: 'random bytes', bytes: Buffer.from(b), error: /^PeerFailureError: rank 1 / })),
);

/** Hellos rank 0 must refuse: its own rank, ranks outside the world. */
const badHello = fc.oneof(fc.constant(0), fc.integer({ min: 2, max: 0xffffffff })).map((r) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(r >>> 0);
  return { what: `hello from rank ${r}`, bytes: b };
});

let target: TargetProcess;
let storeServer: TcpStoreServer;
let store: TcpStore;
let round = 0;

function connect(addr: string): Promise<net.Socket> {
  const [host, port] = addr.split(':');
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port: Number(port) }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Echo payloads that came back on P2P group 7 tag 8, parsed from rank 0's frames. */
function collectEchoes(sock: net.Socket): Buffer[] {
  const echoes: Buffer[] = [];
  let pending = Buffer.alloc(0);
  sock.on('data', (d: Buffer) => {
    pending = Buffer.concat([pending, d]);
    while (pending.length >= HEADER_BYTES) {
      const h = readHeader(pending);
      if (pending.length < HEADER_BYTES + h.length) break;
      if (h.kind === FrameKind.P2P && h.group === 7 && h.tag === 8) echoes.push(Buffer.from(pending.subarray(HEADER_BYTES, HEADER_BYTES + h.length)));
      pending = pending.subarray(HEADER_BYTES + h.length);
    }
  });
  return echoes;
}

async function oneRound(hellos: Array<{ what: string; bytes: Buffer }>, cases: Case[], end: Ending): Promise<string[]> {
  const r = round++;
  const problems: string[] = [];
  const roundStore = new PrefixStore(`round${r}`, store);
  // as a real rank 1 does: say which host it is on (rank 0 reads every rank's before the mesh forms)
  await roundStore.set('mesh/host/1', 'fuzz-peer-host');
  const addr = (await roundStore.get('mesh/addr/0', 30_000)).toString();
  for (const h of hellos) {
    const s = await connect(addr);
    const closed = new Promise<void>((res) => s.once('close', () => res()));
    s.on('error', () => {});
    s.write(h.bytes);
    const t = setTimeout(() => {
      problems.push(`${h.what}: still connected after 10 s`);
      s.destroy();
    }, 10_000);
    await closed;
    clearTimeout(t);
  }
  const sock = await connect(addr);
  sock.on('error', () => {});
  const echoes = collectEchoes(sock);
  const hello = Buffer.alloc(4);
  hello.writeUInt32LE(1);
  sock.write(hello);
  await target.waitFor((e) => e.event === 'ready' && e.round === r, 30_000);
  const expected = cases.filter((c) => c.echo).map((c) => c.echo!);
  sock.write(Buffer.concat(cases.map((c) => c.bytes)));
  // the echoes arrive before the ending is sent, so a broken ending cannot cut them off
  const deadline = Date.now() + 20_000;
  while (echoes.length < expected.length && Date.now() < deadline && !sock.destroyed) await new Promise((res) => setTimeout(res, 2));
  if (echoes.length !== expected.length || echoes.some((e, i) => !e.equals(expected[i])))
    problems.push(`round ${r}: ${echoes.length} of ${expected.length} echoes came back intact`);
  const closed = new Promise<void>((res) => sock.once('close', () => res()));
  sock.end(end.bytes);
  const gone = await target.waitFor((e) => e.event === 'peer-gone' && e.round === r, 30_000).catch((e: Error) => ({ error: `no end of round: ${e.message}` }));
  if (!end.error.test(String(gone.error))) problems.push(`round ${r} ended by ${end.what}: rank 0 said ${JSON.stringify(gone.error)}`);
  sock.destroy();
  await closed;
  return problems;
}

beforeAll(async () => {
  storeServer = await startTcpStoreServer({ port: 0 });
  store = await TcpStore.create({ port: storeServer.port, timeoutMs: 30_000 });
  target = await startTarget(['mesh', String(storeServer.port)]);
}, 60_000);

afterAll(async () => {
  await target?.stop();
  await store?.close();
  await storeServer?.close();
});

it('data plane: hellos, frames, aborts, byes, oversized and broken frames from a peer', async () => {
  const BATCH = 40; // cases per round (a round: one Mesh on rank 0)
  const plan = fuzzPlan('data plane frames', BATCH);
  const started = Date.now();
  const problems = await runFuzz(
    plan,
    fc
      .tuple(fc.array(badHello, { maxLength: 2 }), ending)
      .chain(([hellos, end]) =>
        fc.array(body, { minLength: BATCH - 1 - hellos.length, maxLength: BATCH - 1 - hellos.length }).map((cases) => ({ hellos, cases, end })),
      ),
    async ({ hellos, cases, end }) => {
      const p = await oneRound(hellos, cases, end);
      if (!target.alive()) p.push(`rank 0 exited: ${target.stderr.join('').slice(-1500)}`);
      return p;
    },
  );
  expect(problems.slice(0, 20)).toEqual([]);
  expect(target.alive()).toBe(true);
  expect(target.stderr.join('')).not.toMatch(/unhandled|uncaught|fatal/i);
  // and a last, clean round: the process still serves a peer
  expect(
    await oneRound([], [{ what: 'echo', bytes: frame(FrameKind.P2P, 7, 7, NO_SIGNATURE, Buffer.alloc(16, 9)), echo: Buffer.alloc(16, 9) }], {
      what: 'clean close',
      bytes: Buffer.alloc(0),
      error: gone,
    }),
  ).toEqual([]);
  // headers announced up to 4 GiB: only what arrived was held
  expect(target.peakRss()).toBeLessThan(400 * 1024 * 1024);
  process.stdout.write(
    `fuzz data plane frames: ${plan.cases} cases in ${round} rounds, ${((Date.now() - started) / 1000).toFixed(1)} s, peak RSS ${(target.peakRss() / 2 ** 20).toFixed(0)} MiB\n`,
  );
}, 240_000);
