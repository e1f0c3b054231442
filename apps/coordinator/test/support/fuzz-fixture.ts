// What the coordinator fuzz tests share: a real nats-server and coordinator process holding some
// state (an agent, a group, a closed rendezvous round), a snapshot of every KV bucket and REST
// registry to compare before and after, and the coordinator's output scanned for crashes.
import { connect } from '@nats-io/transport-node';
import { NatsConnection } from '@nats-io/nats-core';
import { Kvm } from '@nats-io/kv';
import { jetstreamManager } from '@nats-io/jetstream';
import { AGENT_SUBJECTS, GROUP_SUBJECTS, PROTOCOL_VERSION, RDZV_SUBJECTS, clusterNames } from '@cmesh/protocol';
import { NatsServer, startNatsServer } from '@cmesh/testing';
import { CoordinatorProcess, startCoordinatorProcess } from '@cmesh/testing/mesh';
import { KvStream } from '../../src/state/kv-keys';

export const FIXTURE_AGENT = {
  protocolVersion: PROTOCOL_VERSION,
  agentId: 'fz-agent',
  name: 'fz-agent',
  host: '127.0.0.1',
  device: { kind: 'cpu', index: 0 },
  backends: [{ name: 'tcp', available: true }],
  dataPlane: { host: '127.0.0.1' },
};

export interface CoordinatorFuzzFixture {
  nats: NatsServer;
  nc: NatsConnection;
  coord: CoordinatorProcess;
  /** every line the coordinator wrote after it started */
  output: string[];
  request(subject: string, data: string | Uint8Array, timeoutMs?: number): Promise<unknown>;
  /** KV buckets (leases left out: they are renewed on a timer) and the REST registries */
  snapshot(): Promise<Record<string, unknown>>;
  /** the coordinator still answers a valid request and its process is alive */
  healthy(): Promise<boolean>;
  stop(): Promise<void>;
}

/** `token`: the coordinator requires it (CMESH_API_TOKEN) and the fixture's own REST reads send it. */
export async function startCoordinatorFuzzFixture(opts: { token?: string; readToken?: string } = {}): Promise<CoordinatorFuzzFixture> {
  const nats = await startNatsServer();
  const nc = await connect({ servers: nats.url });
  // heartbeats far apart: the fixture's agent must not turn lost while the cases run
  const auth: Record<string, string> = opts.token ? { CMESH_API_TOKEN: opts.token, ...(opts.readToken ? { CMESH_API_READ_TOKEN: opts.readToken } : {}) } : {};
  const coord = await startCoordinatorProcess(nats.url, { CMESH_HEARTBEAT_MS: '600000', ...auth });
  const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
  const output: string[] = [];
  for (const s of [coord.proc.stdout!, coord.proc.stderr!]) s.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));

  const request = async (subject: string, data: string | Uint8Array, timeoutMs = 15_000) => (await nc.request(subject, data, { timeout: timeoutMs })).json();
  const ok = async (subject: string, body: unknown) => {
    const r = (await request(subject, JSON.stringify(body))) as { ok: boolean };
    if (!r.ok) throw new Error(`fixture ${subject}: ${JSON.stringify(r)}`);
    return r;
  };
  await ok(AGENT_SUBJECTS.register(FIXTURE_AGENT.agentId), FIXTURE_AGENT);
  await ok(GROUP_SUBJECTS.create, { members: [FIXTURE_AGENT.agentId], name: 'fz-group' });
  await ok(RDZV_SUBJECTS.join, { runId: 'fz-run', nodeId: 'fz-node', minNodes: 1, maxNodes: 1, lastCallMs: 0 });

  const names = clusterNames();
  const kvm = new Kvm(nc);
  const jsm = await jetstreamManager(nc);
  // every step has a deadline, so a stall fails the test naming it instead of reaching jest's limit
  const get = async (path: string) => (await fetch(`${coord.url}${path}`, { headers, signal: AbortSignal.timeout(20_000) })).json();
  const snapshot = async () => {
    const out: Record<string, unknown> = {};
    for (const bucket of [names.buckets.state, names.buckets.jobs, names.buckets.claims]) {
      const kv = await kvm.create(bucket);
      // the stream's one-answer listing: kv.keys() walks a consumer until nothing is pending and
      // never ends while a key is rewritten faster than it drains (the leader lease, the claims)
      for (const k of (await new KvStream(jsm, bucket).keys()).sort()) {
        if (bucket === names.buckets.state && k === 'leader') continue;
        const e = await kv.get(k);
        if (e && e.operation === 'PUT') out[`${bucket}/${k}`] = e.string();
      }
    }
    for (const path of ['/agents', '/groups', '/rendezvous', '/jobs']) out[`GET ${path}`] = await get(path);
    return out;
  };
  const healthy = async () => {
    if (coord.proc.exitCode !== null || coord.proc.signalCode !== null) return false;
    const r = (await request(AGENT_SUBJECTS.list, JSON.stringify({}))) as { ok: boolean; agents?: Array<{ agentId: string }> };
    const h = await fetch(`${coord.url}/health`, { signal: AbortSignal.timeout(20_000) });
    return r.ok && !!r.agents?.some((a) => a.agentId === FIXTURE_AGENT.agentId) && h.status === 200;
  };
  return {
    nats,
    nc,
    coord,
    output,
    request,
    snapshot,
    healthy,
    stop: async () => {
      await nc.close().catch(() => {});
      await coord.stop();
      await nats.stop();
    },
  };
}

export { crashLines } from '@cmesh/testing';
