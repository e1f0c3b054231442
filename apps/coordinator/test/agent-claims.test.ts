// Agent claims in KV (real nats-server): a job's release must free its agents even when a renewal
// of the same claims races it, as the job runner's tick does at the end of a job.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { clusterNames } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { AgentClaims } from '../src/jobs/agent-claims';

describe('agent claims (real nats-server)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
  }, 30_000);
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('a release racing renewals of the same job frees every agent', async () => {
    const claims = new AgentClaims(nc, clusterNames().buckets.claims, 'r1');
    await claims.open();
    const agents = ['a0', 'a1', 'a2', 'a3'];
    for (let round = 0; round < 30; round++) {
      const job = `job${round}`;
      expect((await claims.claimAll(agents, job)).ok).toBe(true);
      await Promise.all([claims.renew(agents, job), claims.release(agents, job), claims.renew(agents, job)]);
      for (const a of agents) expect([round, a, await claims.holder(a)]).toEqual([round, a, null]);
    }
  }, 60_000);
});
