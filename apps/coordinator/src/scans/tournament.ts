// Round-robin tournament by the circle method: P players meet each other once in P-1 rounds of
// P/2 pairs, so every agent is in one pair at a time and a scan of P agents takes O(P) rounds.
// The first player stays put and the others rotate one place per round; an odd P gets a bye
// (a phantom player: whoever meets it sits the round out), so it takes P rounds of (P-1)/2 pairs.

/** Rounds of pairs [a, b] (a before b in `players`' order); every unordered pair exactly once. */
export function roundRobin<T>(players: readonly T[]): [T, T][][] {
  if (new Set(players).size !== players.length) throw new Error('roundRobin: players must be distinct');
  if (players.length < 2) return [];
  const BYE = Symbol('bye');
  const ring: (T | typeof BYE)[] = players.length % 2 ? [...players, BYE] : [...players];
  const n = ring.length;
  const order = new Map(players.map((p, i) => [p, i]));
  const rounds: [T, T][][] = [];
  for (let r = 0; r < n - 1; r++) {
    const pairs: [T, T][] = [];
    for (let i = 0; i < n / 2; i++) {
      const x = ring[i];
      const y = ring[n - 1 - i];
      if (x === BYE || y === BYE) continue;
      pairs.push(order.get(x)! < order.get(y)! ? [x, y] : [y, x]);
    }
    rounds.push(pairs);
    // keep ring[0], rotate the rest one place clockwise
    ring.splice(1, 0, ring.pop()!);
  }
  return rounds;
}
