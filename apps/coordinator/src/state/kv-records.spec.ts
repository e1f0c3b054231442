import { z } from 'zod';
import { RecordCheck, stateRecordSchema } from './kv-records';

const enc = new TextEncoder();
const bytes = (v: unknown) => enc.encode(typeof v === 'string' ? v : JSON.stringify(v));

describe('records read back from KV', () => {
  const counted: string[] = [];
  const warned: string[] = [];
  const check = new RecordCheck('b', { count: (subject, reason) => counted.push(`${subject}:${reason}`), warn: (l) => warned.push(l) });
  const Schema = z.object({ id: z.string(), n: z.number().int() });
  beforeEach(() => {
    counted.length = 0;
    warned.length = 0;
  });

  it('a valid record comes back as stored, fields the schema does not name kept', () => {
    expect(check.decode('k', bytes({ id: 'a', n: 1, extra: [1] }), Schema)).toEqual({ id: 'a', n: 1, extra: [1] });
    expect(counted).toEqual([]);
  });

  it('one that is not JSON, not valid or too deep is skipped, counted under kv:<bucket> and logged at most once per interval', () => {
    expect(check.decode('k1', bytes('{"id":'), Schema)).toBeUndefined();
    expect(check.decode('k2', bytes({ id: 'a', n: 'x' }), Schema)).toBeUndefined();
    expect(check.decode('k3', bytes({ id: 'a', n: 1.5 }), Schema)).toBeUndefined();
    expect(check.decode('k4', bytes(`${'['.repeat(100_000)}${']'.repeat(100_000)}`), Schema)).toBeUndefined();
    expect(check.decode('k5', new Uint8Array([0xff, 0xfe]), Schema)).toBeUndefined();
    expect(counted).toEqual(['kv:b:not_json', 'kv:b:invalid', 'kv:b:invalid', 'kv:b:invalid', 'kv:b:not_json']);
    expect(warned).toHaveLength(2); // one per reason in this interval
    expect(warned[1]).toMatch(/^kv:b: skipped the record "k2" \(invalid\): not a valid record: n: /);
  });

  it('__proto__ in a record is dropped, not followed', () => {
    const r = check.decode('k', bytes('{"id":"a","n":1,"__proto__":{"polluted":true}}'), Schema) as Record<string, unknown>;
    expect(r).toEqual({ id: 'a', n: 1 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("the state bucket's keys have their kind's schema", () => {
    expect(stateRecordSchema('agents.a').safeParse({ agentId: 'a' }).success).toBe(false);
    expect(stateRecordSchema('counters.groups').safeParse(3).success).toBe(true);
    expect(stateRecordSchema('counters.groups').safeParse('3').success).toBe(false);
    expect(stateRecordSchema('leader').safeParse({ holder: 'r', expiresAt: 1 }).success).toBe(true);
    expect(stateRecordSchema('something.else').safeParse({ any: 1 }).success).toBe(true);
  });
});
