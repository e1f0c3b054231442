import { ServiceGroupOp, ServiceGroupPlaced, ServiceGroupRankStatusSchema } from '@cmesh/protocol';
import { FromMemberWorker, MemberOpStats, serviceGroupOpBytes } from './member-stats';

const op = (o: Partial<ServiceGroupOp>): ServiceGroupOp => ({ seq: 1, op: 'allReduce', dtype: 'float32', count: 4, timeoutMs: 1000, bytes: 16, ...o });

it("an op's bytes are nccl-tests' size: its larger buffer, the root's for gather and scatter", () => {
  expect(serviceGroupOpBytes(op({}), 4)).toBe(16);
  expect(serviceGroupOpBytes(op({ op: 'reduce', dst: 1 }), 4)).toBe(16);
  expect(serviceGroupOpBytes(op({ op: 'allGather', dtype: 'int64' }), 4)).toBe(4 * 4 * 8);
  expect(serviceGroupOpBytes(op({ op: 'gather', dst: 3 }), 4)).toBe(64);
  expect(serviceGroupOpBytes(op({ op: 'scatter', src: 2, dtype: 'float16' }), 4)).toBe(4 * 4 * 2);
  expect(serviceGroupOpBytes(op({ op: 'reduceScatter' }), 2)).toBe(32);
  expect(serviceGroupOpBytes(op({ op: 'allToAll', dtype: 'uint8' }), 3)).toBe(12);
  expect(serviceGroupOpBytes(op({ op: 'barrier', dtype: 'uint8', count: 0 }), 4)).toBe(0);
});

it('tells the op running now and the ops done, and reports the finished ops in one batch', () => {
  jest.useFakeTimers();
  const placed = { name: 'grads', round: 2, groupId: 'grads_2', size: 2, members: [], storePrefix: 'p' } as ServiceGroupPlaced;
  const reports: FromMemberWorker[] = [];
  const s = new MemberOpStats(placed, 1, (r) => reports.push(r));
  expect(s.status(0)).toEqual({ rank: 1, running: null, queued: 0, opsDone: 0, bytes: 0 });
  const a = op({ seq: 1, count: 1000, bytes: 4000 });
  s.begin(a);
  const running = ServiceGroupRankStatusSchema.parse(s.status(2));
  expect(running).toMatchObject({ rank: 1, running: { op: 'allReduce', seq: 1, dtype: 'float32', count: 1000 }, queued: 2, opsDone: 0 });
  expect(Date.now() - Date.parse(running.running!.since)).toBeLessThan(5000);
  s.end(a);
  const b = op({ seq: 2, op: 'broadcast', src: 0 });
  s.begin(b);
  s.end(b, Object.assign(new Error('x'), { name: 'DistTimeoutError', code: 'TIMEOUT' }));
  expect(s.status(0)).toEqual({ rank: 1, running: null, queued: 0, opsDone: 2, bytes: 4016 });
  expect(reports).toEqual([]);
  jest.advanceTimersByTime(200);
  expect(reports).toEqual([
    {
      type: 'service-group-ops',
      ops: [
        { name: 'grads', op: 'allReduce', dtype: 'float32', size: 2, bytes: 4000, seconds: expect.any(Number) },
        { name: 'grads', op: 'broadcast', dtype: 'float32', size: 2, bytes: 16, seconds: expect.any(Number), error: 'TIMEOUT' },
      ],
    },
  ]);
  // one report holds at most 1000 ops; flush() sends what is left at once (the worker's exit)
  for (let i = 0; i < 1001; i++) s.end(a);
  expect(reports.map((r) => (r.type === 'service-group-ops' ? r.ops.length : 0))).toEqual([2, 1000]);
  s.flush();
  expect(reports.map((r) => (r.type === 'service-group-ops' ? r.ops.length : 0))).toEqual([2, 1000, 1]);
  jest.advanceTimersByTime(1000);
  expect(reports).toHaveLength(3);
  jest.useRealTimers();
});
