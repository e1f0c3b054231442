import type { ServiceGroupRound } from '@cmesh/protocol';
import { PLACEMENT_MISSED_AFTER_MS, PLACEMENT_RESEND_EVERY_MS, PLACEMENT_RESEND_WINDOW_MS, missedPlacements } from './missed-placements';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function round(over: Partial<ServiceGroupRound> = {}): ServiceGroupRound {
  return {
    name: 'g',
    size: 2,
    round: 1,
    state: 'placed',
    joined: [{ member: 'm0' }, { member: 'm1' }],
    placed: {
      name: 'g',
      round: 1,
      groupId: 'g_1',
      size: 2,
      members: [
        { rank: 0, member: 'm0', agentId: 'a0', agentName: 'a0' },
        { rank: 1, member: 'm1', agentId: 'a1', agentName: 'a1' },
      ],
    },
    secret: Buffer.alloc(32, 7).toString('base64'),
    storePrefix: 'cmesh_store_svc_x',
    placedAt: new Date(T0).toISOString(),
    updatedAt: new Date(T0).toISOString(),
    ...over,
  };
}

describe('missedPlacements', () => {
  const later = T0 + PLACEMENT_MISSED_AFTER_MS + 500;

  it('sends again to an agent heard after the placement without the group (it restarted and missed it)', () => {
    const serving = (id: string) => (id === 'a0' ? { at: later, groups: [] } : { at: later, groups: ['g_1'] });
    const sent = new Map<string, number>();
    expect(missedPlacements([round()], serving, sent, later).map((m) => m.rank)).toEqual([0]);
    // not again at once, again after the interval while it still misses it
    expect(missedPlacements([round()], serving, sent, later + 100)).toEqual([]);
    expect(missedPlacements([round()], serving, sent, later + PLACEMENT_RESEND_EVERY_MS).map((m) => m.rank)).toEqual([0]);
  });

  it('leaves agents that serve the group, were not heard since the placement plus the margin, or rounds not placed or placed long ago', () => {
    const none = () => ({ at: later, groups: [] as string[] });
    expect(missedPlacements([round()], (id) => ({ at: later, groups: id ? ['g_1'] : [] }), new Map(), later)).toEqual([]);
    expect(
      missedPlacements(
        [round()],
        (id) => ({ at: id === 'a0' ? T0 + PLACEMENT_MISSED_AFTER_MS - 1 : later, groups: id === 'a0' ? [] : ['g_1'] }),
        new Map(),
        later,
      ),
    ).toEqual([]);
    // no agent serves it: the group ended (its end missed), nothing waits in its rendezvous
    expect(missedPlacements([round()], none, new Map(), later)).toEqual([]);
    const a1Serves = (id: string) => (id === 'a1' ? { at: later, groups: ['g_1'] } : undefined);
    expect(missedPlacements([round()], a1Serves, new Map(), later)).toEqual([]);
    const missing = (id: string) => ({ at: later, groups: id === 'a1' ? ['g_1'] : [] });
    expect(missedPlacements([round({ state: 'ended' })], missing, new Map(), later)).toEqual([]);
    const old = T0 + PLACEMENT_RESEND_WINDOW_MS + 1;
    expect(missedPlacements([round()], (id) => ({ at: old, groups: id === 'a1' ? ['g_1'] : [] }), new Map(), old)).toEqual([]);
  });

  it('forgets what it sent for rounds no longer placed', () => {
    const sent = new Map<string, number>();
    const missing = (id: string) => ({ at: later, groups: id === 'a1' ? ['g_1'] : [] });
    missedPlacements([round()], missing, sent, later);
    expect([...sent.keys()]).toEqual(['g_1/0']);
    missedPlacements([round({ state: 'ended' })], missing, sent, later);
    expect(sent.size).toBe(0);
  });
});
