import { Assembly, EarlyChunks } from './chunks';

describe('Assembly', () => {
  it('puts chunks in place in any order and is complete when every byte arrived', () => {
    const a = new Assembly(10);
    expect(a.add(6, Uint8Array.of(7, 8, 9, 10))).toBeNull();
    expect(a.complete).toBe(false);
    expect(a.add(0, Uint8Array.of(1, 2, 3, 4, 5, 6))).toBeNull();
    expect(a.complete).toBe(true);
    expect(Array.from(a.data)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('refuses a chunk that overruns the announced size, naming it', () => {
    const a = new Assembly(4);
    expect(a.add(2, Uint8Array.of(1, 2, 3))).toBe('chunk at 2 of 3 bytes overruns the 4 announced');
  });

  it('an empty message is complete at once', () => {
    expect(new Assembly(0).complete).toBe(true);
  });

  it('a chunk seen again (a replay) neither completes the message early nor changes it', () => {
    const a = new Assembly(8);
    expect(a.add(0, Uint8Array.of(1, 2, 3, 4))).toBeNull();
    expect(a.add(0, Uint8Array.of(1, 2, 3, 4))).toBeNull();
    expect(a.complete).toBe(false);
    expect(a.add(4, Uint8Array.of(5, 6, 7, 8))).toBeNull();
    expect(a.complete).toBe(true);
    expect(Array.from(a.data)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});

describe('EarlyChunks', () => {
  it('keeps chunks before their header up to its limits of ops and bytes, and gives them back once', () => {
    const e = new EarlyChunks(2, 10);
    expect(e.add(1, 0, Uint8Array.of(1, 2, 3))).toBe(true);
    expect(e.add(2, 0, Uint8Array.of(4, 5, 6))).toBe(true);
    // a third op, or bytes past the limit: refused
    expect(e.add(3, 0, Uint8Array.of(7))).toBe(false);
    expect(e.add(1, 3, Uint8Array.of(1, 2, 3, 4, 5))).toBe(false);
    expect(e.size).toEqual({ ops: 2, bytes: 6 });
    expect(e.take(1).map((c) => [c.offset, Array.from(c.data)])).toEqual([[0, [1, 2, 3]]]);
    expect(e.take(1)).toEqual([]);
    e.dropBefore(3);
    expect(e.size).toEqual({ ops: 0, bytes: 0 });
  });
});
