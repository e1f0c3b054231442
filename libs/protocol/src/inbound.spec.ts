import { z } from 'zod';
import { Inbound, InboundMsg, RateLimitedLog } from './kit';
import { RejectReason, decodeMessage, subjectCovers } from './inbound';

const text = (s: string) => new TextEncoder().encode(s);
const Schema = z.object({ id: z.string(), n: z.number().int() });

describe('decodeMessage', () => {
  it('names the reason: not JSON, invalid UTF-8, over the size limit, not matching the schema', () => {
    expect(decodeMessage(Schema, text('{'))).toMatchObject({ ok: false, reason: 'not_json' });
    expect(decodeMessage(Schema, new Uint8Array([0x7b, 0xff, 0x7d]))).toMatchObject({ ok: false, reason: 'not_json' });
    expect(decodeMessage(Schema, new Uint8Array(0))).toMatchObject({ ok: false, reason: 'not_json' });
    expect(decodeMessage(Schema, text('{"id":"a","n":1}'), { maxBytes: 8 })).toMatchObject({
      ok: false,
      reason: 'too_large',
      message: 'payload of 16 bytes is over the limit of 8',
    });
    expect(decodeMessage(Schema, text('{"id":5,"n":1.5}'))).toMatchObject({
      ok: false,
      reason: 'invalid',
      issues: [expect.stringMatching(/^id: /), expect.stringMatching(/^n: /)],
    });
    expect(decodeMessage(Schema, text('{"id":"a","n":1}'))).toEqual({ ok: true, value: { id: 'a', n: 1 } });
    expect(decodeMessage(z.object({}), new Uint8Array(0), { empty: {} })).toEqual({ ok: true, value: {} });
  });

  it('drops __proto__ keys at every depth, so no copy of a body can change a prototype', () => {
    const Loose = z.looseObject({ a: z.looseObject({}) });
    const d = decodeMessage(Loose, text('{"__proto__":{"polluted":1},"a":{"__proto__":{"x":2}}}'));
    expect(d.ok).toBe(true);
    const v = (d as { value: Record<string, Record<string, unknown>> }).value;
    expect(Object.keys(v)).toEqual(['a']);
    expect(Object.getPrototypeOf(Object.assign({}, v))).toBe(Object.prototype);
    expect(Object.getPrototypeOf(Object.assign({}, v.a))).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

function msg(data: string, reply?: string, subject = 's.x'): InboundMsg & { replies: unknown[] } {
  const replies: unknown[] = [];
  return { subject, data: text(data), reply, replies, respond: (d) => (replies.push(JSON.parse(new TextDecoder().decode(d))), true) };
}

describe('Inbound', () => {
  const setup = (refusal?: (e: unknown) => unknown) => {
    const counted: [string, RejectReason][] = [];
    const warned: string[] = [];
    const inbound = new Inbound({ count: (s, r) => counted.push([s, r]), warn: (l) => warned.push(l), refusal });
    return { counted, warned, inbound };
  };

  it('an event handler sees valid bodies only; a throwing handler is counted and logged, never thrown', async () => {
    const { counted, warned, inbound } = setup();
    const seen: unknown[] = [];
    const cb = inbound.event('s.*', Schema, (b) => {
      if (b.n === 0) throw new Error('boom');
      if (b.n === 1) return Promise.reject(new Error('async boom'));
      seen.push(b);
    });
    for (const d of ['{', '[]', '{"id":"a","n":2}', '{"id":"a","n":0}', '{"id":"a","n":1}']) expect(() => cb(null, msg(d))).not.toThrow();
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([{ id: 'a', n: 2 }]);
    expect(counted).toEqual([
      ['s.*', 'not_json'],
      ['s.*', 'invalid'],
      ['s.*', 'handler_error'],
      ['s.*', 'handler_error'],
    ]);
    expect(warned.filter((l) => l.includes('handler failed: Error: boom'))).toHaveLength(1);
    expect(warned.filter((l) => l.includes('async boom'))).toHaveLength(0); // same key within the interval
  });

  it('a request gets BAD_REQUEST naming the fields, the refusal it was refused with, or INTERNAL', async () => {
    class Refused extends Error {}
    const { counted, inbound } = setup((e) => (e instanceof Refused ? { ok: false, error: { code: 'NOT_FOUND', message: e.message } } : undefined));
    const cb = inbound.request('s.get', Schema, async (b) => {
      if (b.n === 0) throw new Refused('no such thing');
      if (b.n === 1) throw new Error('bug');
      return { ok: true, id: b.id };
    });
    const ms = ['{"id":5}', '{"id":"a","n":0}', '{"id":"a","n":1}', '{"id":"a","n":2}', 'nope'].map((d) => msg(d, '_INBOX.1', 's.get'));
    for (const m of ms) cb(null, m);
    const noReply = msg('{', undefined, 's.get');
    cb(null, noReply);
    await new Promise((r) => setImmediate(r));
    expect(ms.map((m) => m.replies)).toEqual([
      [
        {
          ok: false,
          error: { code: 'BAD_REQUEST', message: 's.get: invalid message', issues: [expect.stringMatching(/^id: /), expect.stringMatching(/^n: /)] },
        },
      ],
      [{ ok: false, error: { code: 'NOT_FOUND', message: 'no such thing' } }],
      [{ ok: false, error: { code: 'INTERNAL', message: 'bug' } }],
      [{ ok: true, id: 'a' }],
      [{ ok: false, error: { code: 'BAD_REQUEST', message: 's.get: body is not valid JSON' } }],
    ]);
    expect(noReply.replies).toEqual([]);
    // a refusal is an answer, not a failure
    expect(counted.map((c) => c[1]).sort()).toEqual(['handler_error', 'invalid', 'not_json', 'not_json']);
  });

  it("refuses what a JetStream consumer delivered to the subject (its own subject is the stream's), unanswered and unhandled", async () => {
    const { counted, inbound } = setup();
    const seen: unknown[] = [];
    const ev = inbound.event('s.*', Schema, (b) => void seen.push(b));
    const req = inbound.request('s.get', Schema, async (b) => (seen.push(b), { ok: true }));
    const injected = msg('{"id":"a","n":1}', '$JS.ACK.KV_b.c.1.1.1.1.0', '$KV.b.k');
    ev(null, injected);
    req(null, injected);
    ev(null, msg('{"id":"b","n":2}', undefined, 's.y'));
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([{ id: 'b', n: 2 }]);
    expect(injected.replies).toEqual([]);
    expect(counted).toEqual([
      ['s.*', 'not_published'],
      ['s.get', 'not_published'],
    ]);
  });
});

describe('subjectCovers', () => {
  it('matches NATS wildcards token by token', () => {
    expect(subjectCovers('a.*.c', 'a.b.c')).toBe(true);
    expect(subjectCovers('a.>', 'a.b.c')).toBe(true);
    expect(subjectCovers('a.>', 'a')).toBe(false);
    expect(subjectCovers('a.*', 'a.b.c')).toBe(false);
    expect(subjectCovers('a.b', 'a.b')).toBe(true);
    expect(subjectCovers('cmesh.jobs.start.agent-0', '$KV.cmesh_store_x.a')).toBe(false);
  });
});

describe('RateLimitedLog', () => {
  it('logs a key once per interval and summarises what it held back', async () => {
    const out: string[] = [];
    const log = new RateLimitedLog((l) => out.push(l), 50);
    for (let i = 0; i < 1000; i++) log.report('a', `a ${i}`);
    log.report('b', 'b 0');
    expect(out).toEqual(['a 0', 'b 0']);
    await new Promise((r) => setTimeout(r, 120));
    expect(out).toEqual(['a 0', 'b 0', 'a 999 (and 999 more like it in the last interval)']);
    log.report('a', 'a again');
    expect(out.at(-1)).toBe('a again');
  });
});
