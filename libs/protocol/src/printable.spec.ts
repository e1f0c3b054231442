/* eslint-disable no-control-regex -- these tests look for control characters */
import { printable, printableDeep, printableJson, printableLines, printableLogHooks } from './printable';

// every control character a terminal could act on: C0, DEL, C1, and the invisible format/bidi ones
const CONTROLS = [
  ...Array.from({ length: 0x20 }, (_, i) => i),
  0x7f,
  ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
  0x061c,
  0x200e,
  0x200f,
  0x202a,
  0x202e,
  0x2066,
  0x2069,
  0xfeff,
];
const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

describe('printable', () => {
  it('escapes every control character visibly and leaves the rest as it was', () => {
    expect(printable('\u001b[31mred\u001b[0m')).toBe('\\x1b[31mred\\x1b[0m');
    expect(printable('a\u009b2Jb\u007f')).toBe('a\\x9b2Jb\\x7f');
    expect(printable('evil\u202eexe.txt')).toBe('evil\\u202eexe.txt');
    expect(printable('line\nnext\r\t')).toBe('line\\x0anext\\x0d\\x09');
    expect(printable('agent-0 · gpu 3 — ok ✓ ünïcode')).toBe('agent-0 · gpu 3 — ok ✓ ünïcode');
    for (const c of CONTROLS) expect(printable(`x${String.fromCharCode(c)}y`)).not.toMatch(RAW);
    expect(printable(42)).toBe('42');
  });

  it('keeps newlines of several lines, escapes the rest', () => {
    expect(printableLines('a\u001b[2J\nb')).toBe('a\\x1b[2J\nb');
  });

  it('cleans every string of a record, keys included, and nothing else', () => {
    const rec = { name: 'a\u001bb', n: 3, ok: true, none: null, list: ['\u009b', { ['k\u0007']: 'v\u202e' }] };
    expect(printableDeep(rec)).toEqual({ name: 'a\\x1bb', n: 3, ok: true, none: null, list: ['\\x9b', { 'k\\x07': 'v\\u202e' }] });
    expect(rec.name).toBe('a\u001bb'); // a copy
  });

  it('writes JSON a parser reads back the same, with no raw control character in it', () => {
    const v = { label: 'x\u001b[31m\u009b\u007f\u202ey' };
    const text = printableJson(v, 2);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/); // newlines: the indentation's
    expect(JSON.parse(text)).toEqual(v);
  });

  it("passes a log line's strings through printable", () => {
    const seen: unknown[][] = [];
    printableLogHooks.logMethod.call(undefined, [{ context: 'x' }, 'agent \u001b[2Jevil', 3], (...a: unknown[]) => void seen.push(a));
    expect(seen).toEqual([[{ context: 'x' }, 'agent \\x1b[2Jevil', 3]]);
  });
});
