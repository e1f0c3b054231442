// Fuzzing the flight recorder's NATS subject (cmesh.trace.collect), which every rank started by
// `cmesh run --rdzv-backend nats` or by an agent serves: a rank of a world of 1 in its own process
// gets random bytes, text that is not JSON, truncated, deeply nested, oversized and mistyped
// requests (CMESH_FUZZ_RUNS, default 10000; seed printed). Several ranks answer one request, so a
// rank stays silent when a request is not for it (not JSON, another job) and answers with its
// summary otherwise. Checked: every answer is a summary of this rank, the process is alive,
// printed nothing about an unhandled error, and still answers a valid request after the flood.
import fc from 'fast-check';
import { connect } from '@nats-io/transport-node';
import { NatsConnection, createInbox } from '@nats-io/nats-core';
import { NatsServer, freePort, fuzzPlan, invalidJsonPayload, runFuzz, startNatsServer } from '@cmesh/testing';
import { TargetProcess, startTarget } from './fuzz/target-process';

const SUBJECT = 'cmesh.trace.collect';
const BATCH = 100;
let nats: NatsServer;
let nc: NatsConnection;
let target: TargetProcess;

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: nats.url });
  target = await startTarget(['rank', String(await freePort())], { CMESH_TRACE_NATS_URL: nats.url, CMESH_TRACE_SUBJECT: SUBJECT, CMESH_TRACE_JOB: 'fz-job' });
  await target.waitFor((e) => e.event === 'started', 60_000);
}, 90_000);

afterAll(async () => {
  await target?.stop();
  await nc?.close();
  await nats?.stop();
});

async function ask(body: unknown): Promise<Record<string, unknown>> {
  return (await nc.request(SUBJECT, JSON.stringify(body), { timeout: 10_000 })).json() as Record<string, unknown>;
}

it('flight recorder requests: random, malformed, oversized', async () => {
  const plan = fuzzPlan('rank nats cmesh.trace.collect', BATCH);
  const inbox = createInbox();
  const answers: unknown[] = [];
  const sub = nc.subscribe(inbox, {
    callback: (_err, m) => {
      answers.push(m.json());
    },
  });
  const started = Date.now();
  const problems = await runFuzz(
    plan,
    fc.array(invalidJsonPayload({ job: 'fz-job' }, { required: ['job'], constrained: ['job'] }), { minLength: BATCH, maxLength: BATCH }),
    async (cases) => {
      for (const c of cases) nc.publish(SUBJECT, c.data, { reply: inbox });
      await nc.flush();
      return target.alive() ? [] : [`the rank exited: ${target.stderr.join('').slice(-1500)}`];
    },
  );
  expect(problems).toEqual([]);
  // NATS delivers in order: once this is answered, every case before it was read
  const summary = await ask({ job: 'fz-job' });
  expect(summary).toMatchObject({ rank: 0, job: 'fz-job' });
  await nc.flush();
  sub.unsubscribe();
  for (const a of answers) expect(a).toMatchObject({ rank: 0, job: 'fz-job' });
  expect(target.alive()).toBe(true);
  expect(target.stderr.join('')).not.toMatch(/unhandled|uncaught|fatal/i);
  process.stdout.write(
    `fuzz rank nats ${SUBJECT}: ${plan.cases} cases in ${((Date.now() - started) / 1000).toFixed(1)} s (${answers.length} answered as valid requests of this job or of every job)\n`,
  );
}, 180_000);
