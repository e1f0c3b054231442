import { Assembly } from './chunks';

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
});
