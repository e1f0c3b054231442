// Soak and chaos, bounded for CI (bench/chaos/soak.ts runs it longer): jobs submitted
// continuously to two coordinator replicas while agents, replicas and the nats-server are
// SIGKILLed and restarted and ranks are paused. No accepted job may be lost or hang, every
// failure must name a fault made while the job was open, a rank's fault fails its job within
// the bounds below, and the processes that lived through the run do not grow past them.
import { runSoak, DEFAULT_SOAK } from '../../bench/chaos/soak';
import { formatReport } from '../../bench/chaos/report';

const SECONDS = Number(process.env.CMESH_SOAK_SECONDS ?? 90);
/**
 * A killed agent's job fails within this: at once when its peers see the closed connection,
 * after the job's pings stop (2.5 s) or the store wait times out (3 s) when it dies while the job
 * sets up; the rest is margin for a loaded CI machine.
 */
const KILL_DETECT_MS = 8000;
/** a paused rank's job fails within its collective timeout (3 s) plus this */
const PAUSE_DETECT_MS = 3000 + 5000;
const RSS_GROWTH_BYTES = 64 * 2 ** 20;
const FD_GROWTH = 8;

it(`survives ${SECONDS} s of faults: nothing lost or hung, every failure explained, detection and growth bounded`, async () => {
  const report = await runSoak({ ...DEFAULT_SOAK, seconds: SECONDS, seed: 1, log: (l) => console.log(l) });
  const text = formatReport(report);
  console.log(text);
  const j = report.jobs;
  expect({ lost: j.lost, hung: j.hung, unexplained: j.failedUnexplained }).toEqual({ lost: [], hung: [], unexplained: [] });
  expect(j.succeeded).toBeGreaterThan(j.submitted / 2);
  // every kind of fault was made at least once (the driver cycles through them)
  expect(Object.keys(report.faults).sort()).toEqual(['kill-agent', 'kill-nats', 'kill-replica', 'pause-rank']);
  for (const d of report.detection) expect([d.kind, d.p99Ms! <= (d.kind === 'kill-agent' ? KILL_DETECT_MS : PAUSE_DETECT_MS), text]).toEqual([d.kind, true, text]);
  expect(report.growth.length).toBeGreaterThanOrEqual(2); // the witnesses at least
  for (const g of report.growth) {
    expect([g.name, g.rssEndBytes - g.rssStartBytes <= RSS_GROWTH_BYTES, g.fdsEnd - g.fdsStart <= FD_GROWTH, text]).toEqual([g.name, true, true, text]);
  }
}, (SECONDS + 240) * 1000);
