// A coordinator whose NATS is away refuses a keyed submission with 503 UNAVAILABLE within a
// client's answer timeout (the client retries it with the same key), not after a minute and
// not with 500 INTERNAL.
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';

describe('coordinator while NATS is away (real nats-server and coordinator)', () => {
  let nats: NatsServer;
  let coord: CoordinatorProcess;
  beforeAll(async () => {
    nats = await startNatsServer();
    coord = await startCoordinatorProcess(nats.url);
  }, 60_000);
  afterAll(async () => {
    await coord?.stop();
    await nats?.stop();
  });

  const submit = async (key: string) => {
    const t0 = Date.now();
    const r = await fetch(`${coord.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ op: 'allReduce', sizes: [8], nranks: 1 }),
      signal: AbortSignal.timeout(60_000),
    });
    return { status: r.status, body: (await r.json()) as { code?: string; message?: string }, ms: Date.now() - t0 };
  };

  it('a keyed POST /jobs is 503 UNAVAILABLE in under 20 s, naming what to do', async () => {
    // with NATS up the key is recorded and the request judged (no agent: 409)
    expect(await submit('key-before-outage-1')).toMatchObject({ status: 409, body: { code: 'CONFLICT' } });
    await nats.stop();
    for (const key of ['key-during-outage-1', 'key-before-outage-1']) {
      const r = await submit(key);
      expect(r).toMatchObject({ status: 503, body: { code: 'UNAVAILABLE' } });
      expect(r.body.message).toMatch(/retry with the same key/);
      expect(r.ms).toBeLessThan(20_000);
    }
    expect(coord.output()).not.toMatch(/request failed/);
  }, 120_000);
});
