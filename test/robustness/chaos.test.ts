// Soak and chaos, bounded for CI (bench/chaos/soak.ts runs it longer): on a mesh with
// authentication on (every process with its own login, the REST API behind its token), jobs
// submitted continuously to two coordinator replicas and a pair of service members running
// allReduces on service groups, while agents, replicas and the nats-server are SIGKILLed and
// restarted and ranks are paused. No submission may go unanswered (each is sent again under its
// idempotency key while no replica answers), no accepted job may be lost or hang, every failure
// must be one a fault made while the job was open can cause (causes.ts), a rank's fault fails its
// job within the bounds below, no service result may be wrong in any element, no service call may
// hang, a failed service call must fail with the library's typed error a fault can cause, and the
// processes that lived through the run do not grow past the bounds below.
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

it(
  `survives ${SECONDS} s of faults: nothing lost or hung, every failure explained, detection and growth bounded`,
  async () => {
    // one job at a time on four agents (a job's two and the service pair's two): CI runs another
    // test file beside this one on its two cores, and a starved rank is then lost with no fault to name
    const report = await runSoak({ ...DEFAULT_SOAK, agents: 4, inFlight: 1, seconds: SECONDS, seed: 1, log: (l) => console.log(l) });
    const text = formatReport(report);
    console.log(text);
    const j = report.jobs;
    expect({ lost: j.lost, hung: j.hung, unexplained: j.failedUnexplained }).toEqual({ lost: [], hung: [], unexplained: [] });
    expect(j.succeeded).toBeGreaterThan(j.submitted / 2);
    const s = report.service!;
    expect({
      wrong: s.ops.wrong,
      hung: [...s.ops.hung, ...s.joins.hung],
      unexplained: [...s.ops.failedUnexplained, ...s.joins.failedUnexplained],
    }).toEqual({ wrong: [], hung: [], unexplained: [] });
    // the service ran through the faults: most calls succeeded, and the pair joined again after a group ended
    expect([s.ops.correct > s.ops.attempted / 2, s.groups >= 2, text]).toEqual([true, true, text]);
    // every kind of fault was made at least once (the driver cycles through them)
    expect(Object.keys(report.faults).sort()).toEqual(['kill-agent', 'kill-nats', 'kill-replica', 'pause-rank']);
    for (const d of report.detection)
      expect([d.kind, d.p99Ms! <= (d.kind === 'kill-agent' ? KILL_DETECT_MS : PAUSE_DETECT_MS), text]).toEqual([d.kind, true, text]);
    expect(report.growth.length).toBeGreaterThanOrEqual(2); // the witnesses at least
    for (const g of report.growth) {
      expect([g.name, g.rssEndBytes - g.rssStartBytes <= RSS_GROWTH_BYTES, g.fdsEnd - g.fdsStart <= FD_GROWTH, text]).toEqual([g.name, true, true, text]);
    }
  },
  (SECONDS + 240) * 1000,
);
