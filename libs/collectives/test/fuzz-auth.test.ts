// Fuzzing the authentication challenge that TcpStore and data-plane listeners run first when the
// run has a secret (CMESH_SECRET): each case is one connection to a store server or to rank 0 of
// a forming mesh, both in their own processes, that sends random bytes, plaintext store frames or
// a plaintext data-plane hello, a hello cut short or of another type, or a correct hello followed
// by a random proof or by the proof of another secret (CMESH_FUZZ_RUNS cases per listener,
// default 10000; seeds printed). Checked: the listener answers only with authentication messages
// (a challenge, a refusal), never accepts, never serves a request, closes the connection; it stays
// alive; the store's keys are unchanged and a client with the secret still works; the mesh still
// forms with the real rank 1 and carries its messages.
import * as net from 'net';
import fc from 'fast-check';
import { fuzzPlan, runFuzz } from '@cmesh/testing';
import { AUTH_MAGIC, AUTH_MESSAGE_BYTES, AuthDialer } from '../src/auth/handshake';
import { PrefixStore, TcpStore, TcpStoreServer, startTcpStoreServer } from '../src/store';
import { Cmd, encodeFrame } from '../src/store/frame-codec';
import { FrameKind, NO_SIGNATURE } from '../src/transport/frame';
import { Mesh } from '../src/transport/mesh';
import { TargetProcess, startTarget } from './fuzz/target-process';

const SECRET = 'fz-secret-0123456789abcdef-0123456789';
const BATCH = 20; // connections in flight at once
const TYPE_AT = AUTH_MAGIC.length;

type Attempt = { what: string; first: Buffer; afterChallenge?: (challenge: Buffer) => Buffer };

function attempts(context: string, payloadBytes: number): fc.Arbitrary<Attempt> {
  const hello = (type = 1) => {
    const h = new AuthDialer(Buffer.from('x'.repeat(16)), context).hello();
    h[TYPE_AT] = type;
    return h;
  };
  return fc.oneof(
    fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b) => ({ what: 'random bytes', first: Buffer.from(b) })),
    fc.constant({ what: 'a plaintext store frame', first: encodeFrame(Cmd.NUM_KEYS, 1) }),
    fc.integer({ min: 0, max: 3 }).map((r) => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(r);
      return { what: `a plaintext data-plane hello from rank ${r}`, first: b };
    }),
    fc.integer({ min: 1, max: AUTH_MESSAGE_BYTES - 1 }).map((n) => ({ what: `${n} bytes of a hello`, first: hello().subarray(0, n) })),
    fc
      .integer({ min: 0, max: 255 })
      .filter((t) => t !== 1)
      .map((t) => ({ what: `an authentication message of type ${t}`, first: hello(t) })),
    fc
      .uint8Array({ minLength: 0, maxLength: 120 })
      .map((proof) => ({ what: `a hello, then a random proof of ${proof.length} bytes`, first: hello(), afterChallenge: () => Buffer.from(proof) })),
    fc
      .string({ minLength: 16, maxLength: 40 })
      .filter((s) => s !== SECRET)
      .map((wrong) => {
        const d = new AuthDialer(Buffer.from(wrong), context, Buffer.alloc(payloadBytes, 1));
        return {
          what: 'a hello, then the proof of another secret',
          first: d.hello(),
          afterChallenge: (c: Buffer) => (d.push(c) as { send?: Buffer }).send ?? Buffer.alloc(0),
        };
      }),
  );
}

/** One connection: what went wrong (an accept, a store reply, a connection left open). */
async function attempt(port: number, a: Attempt): Promise<string[]> {
  const sock = net.connect({ host: '127.0.0.1', port });
  sock.on('error', () => {});
  await new Promise<void>((r, j) => {
    sock.once('connect', r);
    sock.once('error', j);
  });
  let got = Buffer.alloc(0);
  let answered = false;
  const closed = new Promise<void>((r) => sock.once('close', () => r()));
  sock.on('data', (d: Buffer) => {
    got = Buffer.concat([got, d]);
    if (a.afterChallenge && !answered && got.length >= AUTH_MESSAGE_BYTES) {
      answered = true;
      sock.write(a.afterChallenge(got.subarray(0, AUTH_MESSAGE_BYTES)));
      sock.end();
    }
  });
  sock.write(a.first);
  if (!a.afterChallenge) sock.end();
  let open = false;
  const timer = setTimeout(() => {
    open = true;
    sock.destroy();
  }, 15_000);
  await closed;
  clearTimeout(timer);
  const problems: string[] = [];
  if (open) problems.push(`${a.what}: still open 15 s after our side ended`);
  if (got.length % AUTH_MESSAGE_BYTES !== 0) problems.push(`${a.what}: ${got.length} bytes back, not authentication messages`);
  for (let at = 0; at + AUTH_MESSAGE_BYTES <= got.length; at += AUTH_MESSAGE_BYTES) {
    const m = got.subarray(at, at + AUTH_MESSAGE_BYTES);
    if (!m.subarray(0, AUTH_MAGIC.length).equals(AUTH_MAGIC)) problems.push(`${a.what}: a reply that is not an authentication message`);
    else if (m[TYPE_AT] !== 2 && m[TYPE_AT] !== 4)
      problems.push(`${a.what}: an authentication message of type ${m[TYPE_AT]} (${m[TYPE_AT] === 3 ? 'ACCEPT' : '?'})`);
  }
  return problems;
}

async function fuzzListener(name: string, port: () => number, context: string, payloadBytes: number, alive: () => boolean) {
  const plan = fuzzPlan(name, BATCH);
  const started = Date.now();
  const problems = await runFuzz(plan, fc.array(attempts(context, payloadBytes), { minLength: BATCH, maxLength: BATCH }), async (as) => {
    const p = (await Promise.all(as.map((a) => attempt(port(), a)))).flat();
    if (!alive()) p.push('the listener exited');
    return p;
  });
  expect(problems.slice(0, 20)).toEqual([]);
  process.stdout.write(`fuzz ${name}: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

describe('authentication under fuzzing', () => {
  let store: TargetProcess;
  let rank0: TargetProcess;
  let meshStore: TcpStoreServer;
  let client: TcpStore;

  afterAll(async () => {
    await client?.close();
    await store?.stop();
    await rank0?.stop();
    await meshStore?.close();
  });

  it('TcpStore listener with a secret', async () => {
    store = await startTarget(['store'], { CMESH_SECRET: SECRET });
    const { port } = (await store.waitFor((e) => e.event === 'listening')) as { port: number };
    client = await TcpStore.create({ port, timeoutMs: 10_000, secret: SECRET });
    await client.set('fz/a', 'alpha');
    const before = await client.numKeys();
    await fuzzListener(
      'tcp store authentication',
      () => port,
      'store',
      0,
      () => store.alive(),
    );
    expect(store.alive()).toBe(true);
    expect(await client.numKeys()).toBe(before);
    expect((await client.get('fz/a')).toString()).toBe('alpha');
    const fresh = await TcpStore.create({ port, timeoutMs: 10_000, secret: SECRET });
    expect(await fresh.check(['fz/a'])).toBe(true);
    await fresh.close();
  }, 240_000);

  it('data-plane listener with a secret (rank 0 of a forming mesh)', async () => {
    meshStore = await startTcpStoreServer({ port: 0, secret: SECRET });
    rank0 = await startTarget(['mesh', String(meshStore.port)], { CMESH_SECRET: SECRET });
    const s = await TcpStore.create({ port: meshStore.port, timeoutMs: 30_000, secret: SECRET });
    const addr = (await new PrefixStore('round0', s).get('mesh/addr/0', 30_000)).toString();
    const port = Number(addr.split(':')[1]);
    await fuzzListener(
      'data plane authentication',
      () => port,
      'data-plane',
      4,
      () => rank0.alive(),
    );
    expect(rank0.events.some((e) => e.event === 'ready')).toBe(false);
    // the real rank 1 still gets in, and its messages are echoed
    const mesh = await Mesh.create({ rank: 1, size: 2, store: new PrefixStore('round0', s), timeoutMs: 30_000, transport: 'tcp', secret: SECRET });
    const out = new Uint8Array(16).fill(7);
    const back = new Uint8Array(16);
    const echo = mesh.recv(0, FrameKind.P2P, 7, 8, NO_SIGNATURE, back).done;
    await mesh.send(0, FrameKind.P2P, 7, 7, NO_SIGNATURE, out);
    await echo;
    expect([...back]).toEqual([...out]);
    await mesh.close();
    await s.close();
    expect(rank0.alive()).toBe(true);
  }, 240_000);
});
