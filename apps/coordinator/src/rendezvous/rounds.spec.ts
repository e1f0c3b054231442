// joinBatch admits a batch exactly as joins one at a time would, whatever the batch boundaries.
import fc from 'fast-check';
import type { RdzvJoin, RdzvRecord } from '@cmesh/protocol';
import { joinBatch, leave } from './rounds';

const join = (nodeId: string, minNodes = 3, maxNodes = 5, lastCallMs = 1000): RdzvJoin => ({ runId: 'r', nodeId, minNodes, maxNodes, lastCallMs });

/** one join per batch, in order */
function oneByOne(cur: RdzvRecord | undefined, js: RdzvJoin[], now: number): RdzvRecord | undefined {
  let r = cur;
  for (const j of js) r = joinBatch(r, [j], now).record ?? r;
  return r;
}

it('a batch gives the record that its joins one by one give, for any split into batches', () => {
  const node = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g');
  const arb = fc.record({
    ids: fc.array(node, { minLength: 1, maxLength: 14 }),
    cuts: fc.array(fc.nat(14), { maxLength: 5 }),
    min: fc.integer({ min: 1, max: 4 }),
    extra: fc.integer({ min: 0, max: 3 }),
    lastCallMs: fc.constantFrom(0, 1000),
  });
  fc.assert(
    fc.property(arb, ({ ids, cuts, min, extra, lastCallMs }) => {
      const js = ids.map((id) => join(id, min, min + extra, lastCallMs));
      const bounds = [...new Set([0, ...cuts.filter((c) => c < js.length), js.length])].sort((x, y) => x - y);
      let batched: RdzvRecord | undefined;
      for (let i = 0; i + 1 < bounds.length; i++) batched = joinBatch(batched, js.slice(bounds[i], bounds[i + 1]), 5000).record ?? batched;
      expect(batched).toEqual(oneByOne(undefined, js, 5000));
    }),
    { numRuns: 500 },
  );
});

it('closes once full with ranks by sorted node id; later joins wait; a repeated join changes nothing', () => {
  const { record: r } = joinBatch(
    undefined,
    ['e', 'b', 'a', 'd', 'c', 'f', 'b'].map((id) => join(id)),
    1000,
  );
  expect(r).toMatchObject({ state: 'closed', ranks: { a: 0, b: 1, c: 2, d: 3, e: 4 }, waiting: ['f'] });
  expect(r!.participants.map((p) => p.nodeId)).toEqual(['e', 'b', 'a', 'd', 'c']);
  expect(joinBatch(r, [join('a'), join('f')], 2000).record).toBeUndefined();
  // a member leaves: the next round has the others and the one that waited
  expect(leave(r!, 'b', 3000)).toMatchObject({ round: 1, state: 'closed', ranks: { a: 0, c: 1, d: 2, e: 3, f: 4 } });
});

it('MIN joined: open until the last call is over, then the next join closes it', () => {
  const open = joinBatch(undefined, [join('a'), join('b'), join('c')], 1000).record!;
  expect(open).toMatchObject({ state: 'open', lastCallDeadline: 2000 });
  expect(joinBatch(open, [join('a')], 1500).record).toBeUndefined();
  expect(joinBatch(open, [join('a')], 2000).record).toMatchObject({ state: 'closed', ranks: { a: 0, b: 1, c: 2 } });
});

it('a join whose MIN:MAX disagrees is refused alone; the rest of its batch is admitted', () => {
  const out = joinBatch(undefined, [join('a'), join('b', 1, 2), join('c')], 1000);
  expect(out.errors.map((e) => e?.message)).toEqual([undefined, 'run r expects 3:5 nodes, this node asked for 1:2', undefined]);
  expect(out.record!.participants.map((p) => p.nodeId)).toEqual(['a', 'c']);
});
