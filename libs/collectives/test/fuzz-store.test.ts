// Fuzzing the TcpStore server in its own process: well-framed requests it must refuse (unknown
// commands, wrong field counts, amounts that are not 8 bytes or not safe integers, an add past
// the safe range) or may answer without changing anything (get, check, num_keys of fixture keys),
// and frames that end the connection (lengths under a header or over the limit, fields that
// overrun the frame, trailing bytes, frames cut short, random bytes), many per connection
// (CMESH_FUZZ_RUNS cases, default 10000; seed printed). Every well-framed request gets a reply
// with its id (an error naming what is wrong where it cannot be run); a malformed frame whose
// header can be read gets an error with its id, then the connection closes. Afterwards the server
// is alive, serves a real client, its keys are as before, and its peak memory stayed bounded.
import * as net from 'net';
import fc from 'fast-check';
import { fuzzPlan, runFuzz } from '@cmesh/testing';
import { TcpStore } from '../src/store';
import { Cmd, FrameDecoder, MAX_FRAME_BYTES, REPLY_ERROR, REPLY_OK, encodeFrame, i64 } from '../src/store/frame-codec';
import { DEFAULT_TCP_STORE_LIMITS } from '../src/store/tcp-store-server';
import { TargetProcess, startTarget } from './fuzz/target-process';

const FIXTURE: Record<string, string> = { 'fz/a': 'alpha', 'fz/b': '', 'fz/n': '41', 'fz/max': String(Number.MAX_SAFE_INTEGER) };

interface Case {
  what: string;
  bytes: Buffer;
  /** a well-framed request: its id, and whether it must be refused */
  expect?: { id: number; error: boolean };
}

const u8 = (s: string) => Buffer.from(s, 'utf8');
const key = fc.oneof(
  fc.constantFrom(...Object.keys(FIXTURE)),
  fc.string({ maxLength: 20 }).map((s) => `fz/none/${s}`),
);
const field = fc.oneof(
  key.map(u8),
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
);

/** A well-framed request (id filled in later) and whether it must be refused. */
const framed: fc.Arbitrary<{ what: string; tag: number; fields: Buffer[]; error: boolean }> = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 0, max: 255 }).filter((t) => t < 1 || t > 8),
      fc.array(field, { maxLength: 4 }),
    )
    .map(([tag, fields]) => ({ what: `unknown command ${tag}`, tag, fields, error: true })),
  fc
    .tuple(fc.constantFrom(Cmd.SET, Cmd.GET, Cmd.ADD, Cmd.COMPARE_SET, Cmd.DELETE), fc.array(field, { maxLength: 5 }))
    .filter(([tag, f]) => f.length !== { [Cmd.SET]: 2, [Cmd.GET]: 1, [Cmd.ADD]: 2, [Cmd.COMPARE_SET]: 3, [Cmd.DELETE]: 1 }[tag])
    .map(([tag, fields]) => ({ what: `command ${tag} with ${fields.length} fields`, tag, fields, error: true })),
  fc.tuple(fc.constantFrom(Cmd.WAIT, Cmd.CHECK)).map(([tag]) => ({ what: `command ${tag} without keys`, tag, fields: [], error: true })),
  fc.tuple(fc.array(field, { minLength: 1, maxLength: 2 })).map(([fields]) => ({ what: 'num_keys with fields', tag: Cmd.NUM_KEYS, fields, error: true })),
  fc
    .tuple(
      key,
      fc.uint8Array({ maxLength: 16 }).filter((b) => b.length !== 8),
    )
    .map(([k, amount]) => ({ what: `add of a ${amount.length}-byte amount`, tag: Cmd.ADD, fields: [u8(k), Buffer.from(amount)], error: true })),
  fc
    .tuple(
      key,
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).filter((v) => v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)),
    )
    .map(([k, v]) => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(v);
      return { what: `add of ${v}`, tag: Cmd.ADD, fields: [u8(k), b], error: true };
    }),
  fc.constantFrom('fz/a', 'fz/b', 'fz/max').map((k) => ({ what: `add to ${k}, which cannot take it`, tag: Cmd.ADD, fields: [u8(k), i64(1)], error: true })),
  fc.constantFrom(...Object.keys(FIXTURE)).map((k) => ({ what: `get ${k}`, tag: Cmd.GET, fields: [u8(k)], error: false })),
  fc.array(key, { minLength: 1, maxLength: 5 }).map((ks) => ({ what: 'check', tag: Cmd.CHECK, fields: ks.map(u8), error: false })),
  fc.constant(null).map(() => ({ what: 'num_keys', tag: Cmd.NUM_KEYS as number, fields: [] as Buffer[], error: false })),
);

/** A frame after which the connection cannot go on. */
const terminal: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 6 }), fc.uint8Array({ minLength: 7, maxLength: 20 })).map(([len, rest]) => {
    const b = Buffer.concat([Buffer.alloc(4), Buffer.from(rest)]);
    b.writeUInt32LE(len, 0);
    return { what: `length ${len}, under a header`, bytes: b };
  }),
  // refused with one error (the server's maxFrameBytes) and its body skipped as it would arrive; we stop sending
  fc
    .tuple(fc.integer({ min: DEFAULT_TCP_STORE_LIMITS.maxFrameBytes + 1, max: 0xffffffff }), fc.uint8Array({ minLength: 7, maxLength: 20 }))
    .map(([len, rest]) => {
      const b = Buffer.concat([Buffer.alloc(4), Buffer.from(rest)]);
      b.writeUInt32LE(len, 0);
      return { what: `length ${len}, over the limit`, bytes: b };
    }),
  fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 1, max: 0xffffffff })).map(([i, flen]) => {
    // a field whose length runs past the frame's end
    const f = encodeFrame(Cmd.GET, 0, [u8('fz/a'), u8('b'), u8('c'), u8('d')]);
    f.writeUInt32LE(Math.max(flen, 16), 11 + i * (4 + 1) + (i > 0 ? 3 : 0));
    return { what: `field ${i} overruns the frame`, bytes: f };
  }),
  fc.tuple(fc.integer({ min: 1, max: 50 })).map(([n]) => {
    const f = encodeFrame(Cmd.NUM_KEYS, 0, []);
    const b = Buffer.concat([f, Buffer.alloc(n, 0x55)]);
    b.writeUInt32LE(f.length - 4 + n, 0);
    return { what: `${n} bytes after the last field`, bytes: b };
  }),
  fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => ({ what: 'random bytes', bytes: Buffer.from(b) })),
  fc.tuple(fc.integer({ min: 16 * 1024 * 1024, max: MAX_FRAME_BYTES }), fc.integer({ min: 0, max: 4096 })).map(([len, sent]) => {
    const b = Buffer.alloc(4 + sent);
    b.writeUInt32LE(len, 0);
    return { what: `a frame of ${len} bytes cut short after ${sent}`, bytes: b };
  }),
);

/** Sends a batch on one connection; returns what went wrong. */
async function runBatch(
  port: number,
  requests: Array<{ what: string; tag: number; fields: Buffer[]; error: boolean }>,
  last: Case | null,
  split: number,
): Promise<string[]> {
  const cases: Case[] = requests.map((r, i) => ({ what: r.what, bytes: encodeFrame(r.tag, 1000 + i, r.fields), expect: { id: 1000 + i, error: r.error } }));
  if (last) {
    // its id (if it has one) is 1 or garbage: replies to it are told apart by not being 1000+
    cases.push(last);
  }
  const all = Buffer.concat(cases.map((c) => c.bytes));
  const sock = net.connect({ port, host: '127.0.0.1' });
  const decoder = new FrameDecoder();
  const replies = new Map<number, number>();
  const problems: string[] = [];
  const closed = new Promise<void>((resolve) => {
    sock.on('data', (d) => {
      try {
        for (const f of decoder.push(d)) replies.set(f.id, f.tag);
      } catch (e) {
        problems.push(`reply not decodable: ${(e as Error).message}`);
      }
      if ([...Array(requests.length).keys()].every((i) => replies.has(1000 + i)) && !last) sock.end();
    });
    sock.on('close', () => resolve());
    sock.on('error', () => {});
  });
  await new Promise<void>((r, j) => {
    sock.once('connect', r);
    sock.once('error', j);
  });
  // in two writes, so frames are also split across reads
  sock.write(all.subarray(0, split % (all.length + 1)));
  sock.write(all.subarray(split % (all.length + 1)));
  if (!requests.length && !last) sock.end();
  // a frame that may still be incomplete waits for its bytes: we stop sending, so the server sees the end
  if (last && /cut short|random|over the limit/.test(last.what)) sock.end();
  const timer = setTimeout(() => {
    problems.push(`connection still open 20 s after ${last ? last.what : 'the last reply'}`);
    sock.destroy();
  }, 20_000);
  await closed;
  clearTimeout(timer);
  for (const c of cases) {
    if (!c.expect) continue;
    const tag = replies.get(c.expect.id);
    if (tag === undefined) problems.push(`${c.what}: no reply`);
    else if (tag !== (c.expect.error ? REPLY_ERROR : REPLY_OK)) problems.push(`${c.what}: reply ${tag}`);
  }
  // the last frame's header may carry any id: at most one error answers it
  const others = [...replies].filter(([id]) => id < 1000 || id >= 1000 + requests.length);
  if (others.length > (last ? 1 : 0) || others.some(([, tag]) => tag !== REPLY_ERROR))
    problems.push(`unexpected replies ${JSON.stringify(others)} after ${last?.what}`);
  return problems;
}

let target: TargetProcess;
let client: TcpStore;

async function state(): Promise<Record<string, string | number>> {
  const out: Record<string, string | number> = { numKeys: await client.numKeys() };
  for (const k of Object.keys(FIXTURE)) out[k] = (await client.get(k)).toString();
  return out;
}

beforeAll(async () => {
  target = await startTarget(['store']);
  const { port } = (await target.waitFor((e) => e.event === 'listening')) as { port: number };
  client = await TcpStore.create({ port, timeoutMs: 10_000 });
  for (const [k, v] of Object.entries(FIXTURE)) await client.set(k, v);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await target?.stop();
});

it('TcpStore server: malformed, truncated, oversized and random frames', async () => {
  const BATCH = 20; // 19 well-framed requests and, in most batches, one frame that ends the connection
  const plan = fuzzPlan('tcp store frames', BATCH);
  const before = await state();
  const started = Date.now();
  const port = client.port;
  const problems = await runFuzz(
    plan,
    fc.tuple(fc.array(framed, { minLength: BATCH - 1, maxLength: BATCH - 1 }), fc.option(terminal, { freq: 4 }), fc.nat()),
    async ([requests, last, split]) => {
      const p = await runBatch(port, requests, last, split);
      if (!target.alive()) p.push(`the server exited: ${target.stderr.join('').slice(-1000)}`);
      return p;
    },
  );
  expect(problems.slice(0, 20)).toEqual([]);
  expect(target.alive()).toBe(true);
  expect(await state()).toEqual(before);
  // a fresh client still works
  const c2 = await TcpStore.create({ port, timeoutMs: 10_000 });
  await c2.set('fz/after', 'ok');
  expect((await c2.get('fz/after')).toString()).toBe('ok');
  expect(await c2.add('fz/n', 1)).toBe(42);
  await c2.deleteKey('fz/after');
  await c2.add('fz/n', -1);
  await c2.close();
  // frames of up to 1 GiB were announced; only what arrived was held
  expect(target.peakRss()).toBeLessThan(400 * 1024 * 1024);
  process.stdout.write(
    `fuzz tcp store frames: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s, peak RSS ${(target.peakRss() / 2 ** 20).toFixed(0)} MiB\n`,
  );
}, 240_000);

it('TcpStore: random sequences of valid requests behave like a map (torch semantics)', async () => {
  const BATCH = 50;
  const plan = fuzzPlan('tcp store model', BATCH);
  const keys = ['fz/m/a', 'fz/m/b', 'fz/m/c', 'fz/m/n'];
  const base = await client.numKeys();
  const model = new Map<string, Buffer>();
  type Op =
    | { op: 'set'; key: string; value: Buffer }
    | { op: 'get' | 'delete' | 'add'; key: string; amount: number }
    | { op: 'cas'; key: string; expected: Buffer | 'current'; desired: Buffer }
    | { op: 'check'; keys: string[] }
    | { op: 'numKeys' };
  const value = fc.oneof(
    fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b)),
    fc.integer({ min: -1000, max: 1000 }).map((n) => Buffer.from(String(n))),
  );
  const key = fc.constantFrom(...keys);
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant('set' as const), key, value }),
    fc.record({ op: fc.constantFrom('get' as const, 'delete' as const, 'add' as const), key, amount: fc.integer({ min: -(2 ** 40), max: 2 ** 40 }) }),
    fc.record({
      op: fc.constant('cas' as const),
      key,
      expected: fc.oneof(fc.constant('current' as const), value, fc.constant(Buffer.alloc(0))),
      desired: value,
    }),
    fc.record({ op: fc.constant('check' as const), keys: fc.array(key, { minLength: 1, maxLength: 3 }) }),
    fc.constant({ op: 'numKeys' as const }),
  );
  const isInt = (b: Buffer | undefined) => b === undefined || /^-?\d{1,16}$/.test(b.toString());
  const problems = await runFuzz(plan, fc.array(op, { minLength: BATCH, maxLength: BATCH }), async (ops) => {
    const wrong: string[] = [];
    for (const o of ops) {
      const expectEq = (got: unknown, want: unknown) => {
        if (JSON.stringify(got) !== JSON.stringify(want))
          wrong.push(`${JSON.stringify(o)}: got ${JSON.stringify(got)}, the model says ${JSON.stringify(want)}`);
      };
      switch (o.op) {
        case 'set':
          await client.set(o.key, o.value);
          model.set(o.key, o.value);
          break;
        case 'get':
          // a get of a missing key waits for it: only keys that are there
          if (model.has(o.key)) expectEq((await client.get(o.key)).toString('hex'), model.get(o.key)!.toString('hex'));
          break;
        case 'delete':
          expectEq(await client.deleteKey(o.key), model.delete(o.key));
          break;
        case 'add': {
          const cur = model.get(o.key);
          const got = await client.add(o.key, o.amount).then(
            (n) => n,
            (e: Error) => e.name,
          );
          if (!isInt(cur) || !Number.isSafeInteger(Number(cur?.toString() ?? 0) + o.amount)) expectEq(got, 'StoreError');
          else {
            const next = Number(cur?.toString() ?? 0) + o.amount;
            expectEq(got, next);
            model.set(o.key, Buffer.from(String(next)));
          }
          break;
        }
        case 'cas': {
          const cur = model.get(o.key);
          const expected = o.expected === 'current' ? (cur ?? Buffer.alloc(0)) : o.expected;
          const got = await client.compareSet(o.key, expected, o.desired);
          const swap = cur === undefined ? expected.length === 0 : cur.equals(expected);
          if (swap) model.set(o.key, o.desired);
          expectEq(Buffer.from(got).toString('hex'), (swap ? o.desired : (cur ?? expected)).toString('hex'));
          break;
        }
        case 'check':
          expectEq(
            await client.check(o.keys),
            o.keys.every((k) => model.has(k)),
          );
          break;
        case 'numKeys':
          expectEq(await client.numKeys(), base + model.size);
          break;
      }
    }
    return wrong;
  });
  expect(problems.slice(0, 20)).toEqual([]);
  for (const k of keys) await client.deleteKey(k);
  expect(await client.numKeys()).toBe(base);
}, 240_000);
