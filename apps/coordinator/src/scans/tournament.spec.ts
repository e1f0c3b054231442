import { roundRobin } from './tournament';

describe('roundRobin (circle method)', () => {
  for (const p of [2, 3, 4, 5, 7, 8, 16, 17]) {
    it(`${p} players: every pair once, nobody twice in a round, ${p % 2 ? p : p - 1} rounds`, () => {
      const players = Array.from({ length: p }, (_, i) => `agent-${i}`);
      const rounds = roundRobin(players);
      expect(rounds).toHaveLength(p % 2 ? p : p - 1);
      const seen = new Set<string>();
      for (const round of rounds) {
        expect(round).toHaveLength(Math.floor(p / 2));
        const inRound = round.flat();
        expect(new Set(inRound).size).toBe(inRound.length);
        for (const [a, b] of round) {
          expect(players.indexOf(a)).toBeLessThan(players.indexOf(b));
          const key = `${a}|${b}`;
          expect(seen.has(key)).toBe(false);
          seen.add(key);
        }
      }
      expect(seen.size).toBe((p * (p - 1)) / 2);
    });
  }

  it('no rounds for fewer than 2 players; duplicates refused', () => {
    expect(roundRobin([])).toEqual([]);
    expect(roundRobin(['a'])).toEqual([]);
    expect(() => roundRobin(['a', 'b', 'a'])).toThrow(/distinct/);
  });

  it('4 players: the circle method rounds', () => {
    expect(roundRobin(['a', 'b', 'c', 'd'])).toEqual([
      [
        ['a', 'd'],
        ['b', 'c'],
      ],
      [
        ['a', 'c'],
        ['b', 'd'],
      ],
      [
        ['a', 'b'],
        ['c', 'd'],
      ],
    ]);
  });
});
