// The live flight recorder's answering side against a real nats-server: a rank answers the
// coordinator's request with its summary, and stays silent on another job's request and on
// anything that is not a request (many ranks hear each one: no flood of refusals).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { connect } from '@nats-io/transport-node';
import { NatsConnection, TimeoutError } from '@nats-io/nats-core';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { FileStore, InvalidArgumentError, TRACE_MAC_HEADER, TraceDump, checkTraceAnswerMac, resetFlightRecorder, traceAnswerKey } from '../src';
import { startTraceResponder } from '../src/trace/responder';
import { WorldTrace } from '../src/trace/world-trace';

let nats: NatsServer;
let nc: NatsConnection;
let dir: string;
beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: nats.url });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-responder-'));
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('answers with its summary, ignores other jobs, refuses what is not a request', async () => {
  resetFlightRecorder(16);
  const store = new FileStore(path.join(dir, 'store'), { worldSize: 1 });
  const trace = new WorldTrace({ rank: 2, worldSize: 4, store, env: { CMESH_TRACE_JOB: 'job-7', CMESH_TRACE_EXCHANGE_MS: '0' } });
  const g = trace.group(0, [0, 1, 2, 3], 'tcp')!;
  for (let i = 0; i < 5; i++) g.completed(g.collective(i, 'allReduce', 'ring', 'float32', 8, 1000));
  g.collective(5, 'broadcast', 'binomial', 'int32', 3, 1000);
  const env = { CMESH_TRACE_NATS_URL: nats.url, CMESH_TRACE_SUBJECT: 'test.trace.collect' };
  const responder = (await startTraceResponder(trace, env))!;
  try {
    const ask = async (body: string, timeout = 3000) =>
      JSON.parse(new TextDecoder().decode((await nc.request(env.CMESH_TRACE_SUBJECT, new TextEncoder().encode(body), { timeout })).data));
    const d = (await ask('{}')) as TraceDump;
    expect(d).toMatchObject({ rank: 2, world_size: 4, job: 'job-7', pg_status: { 0: { last_completed_collective: 4, last_completed_op: 'allReduce' } } });
    expect(d.entries.at(-1)).toMatchObject({ collective_seq_id: 5, op: 'broadcast', state: 'started', input_dtypes: ['int32'] });
    expect(await ask(JSON.stringify({ job: 'job-7' }))).toMatchObject({ rank: 2 });
    for (const other of [JSON.stringify({ job: 'another' }), 'not json', '[1]', 'null', '{"job":5}', `{"job":"${'x'.repeat(5000)}"}`]) {
      await expect(ask(other, 500)).rejects.toThrow(TimeoutError);
    }
    expect(await ask('')).toMatchObject({ rank: 2 }); // an empty body asks every rank
    // a launcher that names a server must name the subject too
    await expect(startTraceResponder(trace, { CMESH_TRACE_NATS_URL: nats.url })).rejects.toThrow(InvalidArgumentError);
    expect(await startTraceResponder(trace, {})).toBeUndefined();
  } finally {
    await responder.close();
    trace.close();
    await store.close();
  }
}, 30000);

it('with a secret, signs each answer over the request nonce and the dump as sent', async () => {
  resetFlightRecorder(16);
  const store = new FileStore(path.join(dir, 'store-signed'), { worldSize: 1 });
  const trace = new WorldTrace({ rank: 0, worldSize: 2, store, env: { CMESH_TRACE_JOB: 'job-8', CMESH_TRACE_EXCHANGE_MS: '0' } });
  trace.group(0, [0, 1], 'tcp');
  const secret = 'the-data-plane-secret-of-job-8';
  const env = { CMESH_TRACE_NATS_URL: nats.url, CMESH_TRACE_SUBJECT: 'test.trace.signed' };
  const responder = (await startTraceResponder(trace, env, secret))!;
  const unsigned = (await startTraceResponder(trace, { ...env, CMESH_TRACE_SUBJECT: 'test.trace.unsigned' }))!;
  try {
    const key = traceAnswerKey(secret);
    const m = await nc.request(env.CMESH_TRACE_SUBJECT, new TextEncoder().encode(JSON.stringify({ job: 'job-8', nonce: 'n-1' })), { timeout: 3000 });
    const mac = m.headers?.get(TRACE_MAC_HEADER);
    expect(checkTraceAnswerMac(key, 'n-1', m.data, mac)).toBe(true);
    expect(checkTraceAnswerMac(key, 'n-2', m.data, mac)).toBe(false); // not valid for another request
    expect(checkTraceAnswerMac(traceAnswerKey('another-secret-0123456789'), 'n-1', m.data, mac)).toBe(false);
    // a nonce that is not a short string: not a request this rank reads
    for (const bad of [{ nonce: 5 }, { nonce: 'x'.repeat(65) }]) {
      await expect(nc.request(env.CMESH_TRACE_SUBJECT, new TextEncoder().encode(JSON.stringify(bad)), { timeout: 500 })).rejects.toThrow(TimeoutError);
    }
    const plain = await nc.request('test.trace.unsigned', new TextEncoder().encode('{"nonce":"n"}'), { timeout: 3000 });
    expect(plain.headers?.get(TRACE_MAC_HEADER) ?? '').toBe('');
  } finally {
    await responder.close();
    await unsigned.close();
    trace.close();
    await store.close();
  }
}, 30000);
