// Forged flight-recorder answers, against a mesh with authentication on: anyone allowed to answer
// requests hears `trace.collect`, so the client login and an agent login not in the job answer
// every trace request, while a real job runs, with dumps naming a rank as stuck: for the real job
// (no MAC, a garbled one, one made with another secret, a rank the job does not have), for a
// made-up job and for no job. The coordinator keeps, for the real job (whose secret it made),
// only the answers its ranks signed: GET /groups/<job>/trace, GET /traces and `cmesh status
// --stuck` name only its two real ranks, verified; the forged answers for it are dropped and
// counted; the made-up job is shown, marked unverified. The job finishes with every element right.
import { mkdtempSync, rmSync } from 'fs';
import { headers } from '@nats-io/nats-core';
import { tmpdir } from 'os';
import { join } from 'path';
import { TRACE_MAC_HEADER, traceAnswerKey, traceAnswerMac } from '@cmesh/collectives';
import { clusterNames, JobRecord, TraceReport } from '@cmesh/protocol';
import { forgedTraceDump, rejectedMessages } from '@cmesh/testing';
import { renderStuck } from '@cmesh/cli/commands';
import { Mesh, startMesh } from '@cmesh/testing/mesh';
import { statePassword, TestLogins } from './support/logins';

const n = clusterNames();
const enc = new TextEncoder();

describe('forged flight recorder answers', () => {
  let mesh: Mesh;
  let stateDir: string;

  const logins = new TestLogins(
    () => mesh.natsUrl,
    statePassword(() => stateDir),
  );
  const login = (user: string) => logins.login(user);

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'cmesh-sec-trace-'));
    mesh = await startMesh({
      agents: 3,
      port: 0,
      auth: { stateDir },
      write: (l) => process.env.TRACE_DEBUG && process.stdout.write(l + '\n'),
      readyTimeoutMs: 90_000,
    });
  }, 120_000);

  afterAll(async () => {
    await logins.closeAll();
    await mesh?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('never names a forged rank for a verified job; forged answers are dropped or shown unverified', async () => {
    const victim = await mesh.client.submitJob({ op: 'allReduce', sizes: [1 << 20], iters: 600, warmup: 2, check: true, agents: ['agent-0', 'agent-1'] });
    const job = victim.id;
    // nats-server lets a login answer a request once (allow_responses): each attacker answers a
    // request for the job with the next of its forgeries for that job, and a request for every
    // rank with a made-up job's dump (the client) or a dump of no job (agent-2)
    const forgeries = (who: string, nonce: string) => {
      const dump = (o: Parameters<typeof forgedTraceDump>[0]) => enc.encode(JSON.stringify(forgedTraceDump({ ...o, host: who })));
      const wrongKey = traceAnswerKey(`not-the-job-secret-${who}-0123456789`);
      const signed = (data: Uint8Array) => ({ data, mac: traceAnswerMac(wrongKey, nonce, data) });
      return {
        forJob: [
          { data: dump({ job, rank: 1, worldSize: 2, seq: 999 }) },
          { data: dump({ job, rank: 2, worldSize: 3, seq: 999 }), mac: 'A'.repeat(43) },
          signed(dump({ job, rank: 1, worldSize: 2, seq: 999 })),
        ],
        forAll: who === 'client' ? signed(dump({ job: 'ghost-job', rank: 1, worldSize: 2, seq: 777 })) : { data: dump({ rank: 3, worldSize: 4, seq: 555 }) },
      };
    };
    let asked = 0;
    for (const user of ['client', 'agent-2']) {
      const a = await login(user);
      a.nc.subscribe(n.trace.collect, {
        callback: (err, m) => {
          if (err) return;
          const req = m.json() as { job?: string; nonce?: string };
          const f = forgeries(user, req.nonce ?? '');
          const x: { data: Uint8Array; mac?: string } = req.job ? f.forJob[asked++ % f.forJob.length] : f.forAll;
          const h = headers();
          if (x.mac) h.set(TRACE_MAC_HEADER, x.mac);
          m.respond(x.data, { headers: h });
        },
      });
      await a.nc.flush();
      expect(a.violations).toEqual([]); // both may hear the request and answer it: that is the attack
    }
    const metrics = `${mesh.coordinatorUrl}/metrics`;
    const droppedBefore = await rejectedMessages(metrics, n.trace.collect);

    // the job's own ranks answered, signed: every report is theirs alone, whichever forgery came
    let mine: TraceReport | undefined;
    for (let end = Date.now() + 60_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      const res = await fetch(`${mesh.coordinatorUrl}/groups/${job}/trace`, { headers: { authorization: `Bearer ${mesh.auth!.apiToken}` } });
      if (res.status !== 200) {
        expect(res.status).toBe(404); // its workers are still joining
        continue;
      }
      const r = (await res.json()) as TraceReport;
      for (const g of r.reports) {
        expect(g).toMatchObject({ job, verified: true, ranks: [0, 1] });
        expect(g.text).not.toMatch(/rank 2|#999|unverified/);
      }
      if (r.answered === 2) mine = r;
      if (mine && asked >= 6) break; // every forgery for the job was tried, twice
    }
    expect(asked).toBeGreaterThanOrEqual(6);
    expect(mine).toMatchObject({ answered: 2, reports: [{ job, verified: true, pg: '0', ranks: [0, 1] }] });

    // everything: the real job verified and as its ranks say; the others unverified, shown as such
    const all = await mesh.client.get<TraceReport>('/traces');
    const real = all.reports.filter((r) => r.job === job);
    expect(real.length).toBeGreaterThan(0); // its ranks are still running
    for (const r of real) {
      expect(r).toMatchObject({ verified: true, ranks: [0, 1] });
      expect(r.text).not.toMatch(/rank 2|#999|unverified/);
    }
    const ghost = all.reports.find((r) => r.job === 'ghost-job');
    expect(ghost).toMatchObject({ verified: false, waiting: [1], seq: 777 });
    expect(ghost!.text).toMatch(/^group 0 of ghost-job \(unverified\): /);
    expect(all.reports.find((r) => r.job === undefined)).toMatchObject({ verified: false });
    for (const r of all.reports) if (r.job !== job) expect(r.verified).toBe(false);

    // cmesh status --stuck: the forged groups are marked, the real job's never names a forged rank
    const stuck = await renderStuck(mesh.client);
    for (const line of stuck.text.split('\n')) {
      if (line.includes(`of ${job}`)) expect(line).not.toMatch(/rank 2|#999|unverified/);
      if (line.includes('ghost-job') || line.startsWith('group 0:') || line.startsWith('group 0 (')) expect(line).toMatch(/\(unverified\)/);
    }
    expect(stuck.text).toMatch(/group 0 of ghost-job \(unverified\): rank 1 waiting in allReduce #777/);
    // dropped and counted (the wait ends when every rank answered: forged answers after that are not read)
    expect(await rejectedMessages(metrics, n.trace.collect)).toBeGreaterThan(droppedBefore);

    const done: JobRecord = await mesh.client.waitJob(job, undefined, { timeoutMs: 180_000 });
    expect([done.state, done.reason]).toEqual(['succeeded', undefined]);
    // #wrong: every element of both modes checked on both ranks
    expect(done.rows.flatMap((r) => [r.outOfPlace?.wrong, r.inPlace?.wrong])).toEqual([0, 0]);
  }, 240_000);
});
