// NATS failover with real servers (bench/chaos/failover.ts): three nats-servers on loopback in one
// JetStream cluster, authentication on, every bucket on three replicas, two coordinator replicas
// and four agents; jobs submitted continuously (each under an idempotency key, sent again while
// unanswered) and a service pair running allReduces, while each server in turn and then the
// JetStream meta leader is SIGKILLed and started again. Nothing may be lost (a submission never
// answered counts) or hang, every failure must name a fault that can cause it, no service result
// may be wrong, the service group lives through the short outages, and every bucket reads the
// same through every server afterwards.
import { DEFAULT_FAILOVER, formatFailover, runFailover } from '../../bench/chaos/failover';

it('loses nothing while NATS servers die one at a time (the meta leader too); state identical on every server', async () => {
  const report = await runFailover({ ...DEFAULT_FAILOVER, log: (l) => console.log(l) });
  const text = formatFailover(report);
  console.log(text);
  const j = report.jobs;
  expect({ lost: j.lost, hung: j.hung, unexplained: j.failedUnexplained }).toEqual({ lost: [], hung: [], unexplained: [] });
  // three followers' deaths, then the meta leader's; after each a job succeeded again
  expect(report.faults.map((f) => [f.leader, f.firstSuccessMs !== null])).toEqual([
    [false, true],
    [false, true],
    [false, true],
    [true, true],
  ]);
  const s = report.service;
  expect({ wrong: s.ops.wrong, hung: [...s.ops.hung, ...s.joins.hung], unexplained: [...s.ops.failedUnexplained, ...s.joins.failedUnexplained] }).toEqual({
    wrong: [],
    hung: [],
    unexplained: [],
  });
  expect([s.ops.correct > 0, text]).toEqual([true, text]);
  // a group running when a server died still ran correct allReduces once it was back (a 3 s outage is short)
  expect(report.serviceThrough.filter((x) => x.survived === false)).toEqual([]);
  expect(report.kv.differ).toEqual([]);
  // every bucket on all three servers (CMESH_NATS_REPLICAS' default on a cluster of three)
  expect(report.kv.underReplicated).toEqual([]);
  expect(report.kv.buckets).toBeGreaterThanOrEqual(6);
}, 240_000);
