import {
  AGENT_SUBJECTS,
  DEFAULT_CLUSTER,
  clusterSubject,
  GROUP_SUBJECTS,
  InvalidClusterNameError,
  JOB_SUBJECTS,
  RDZV_SUBJECTS,
  RESERVED_CLUSTER_NAMES,
  checkClusterName,
  clusterNames,
} from './index';

/** Every concrete name of a cluster (functions called with a sample id), flattened. */
function allNames(cluster: string): string[] {
  const n = clusterNames(cluster);
  const out: string[] = [
    ...Object.values(n.buckets),
    n.jobStorePrefix('j1', 'r1'),
    n.stores.open,
    ...(['jobs', 'svc', 'rdzv', 'init'] as const).map((k) => n.stores.bucket(k, 'x1')),
  ];
  for (const area of [n.agents, n.groups, n.rdzv, n.jobs])
    for (const v of Object.values(area)) out.push(typeof v === 'function' ? (v as (a: string, b: string) => string)('x1', 'x2') : v);
  return out;
}

describe('cluster names', () => {
  it('keeps the names the default cluster always had', () => {
    const n = clusterNames(DEFAULT_CLUSTER);
    expect(n.agents.register('a0')).toBe('cmesh.agents.register.a0');
    expect(n.agents.registerWildcard).toBe('cmesh.agents.register.*');
    expect(n.agents.events('a0')).toBe('cmesh.agents.events.a0');
    expect(n.groups.create).toBe('cmesh.groups.create');
    expect(n.rdzv.join).toBe('cmesh.rdzv.join');
    expect(n.jobs.eventsWildcard).toBe('cmesh.jobs.events.*.*');
    expect(n.jobs.events('j1', 'a0')).toBe('cmesh.jobs.events.j1.a0');
    expect(n.jobs.start('a0')).toBe('cmesh.jobs.start.a0');
    expect(n.jobs.updates('j1')).toBe('cmesh.jobs.updates.j1');
    expect(n.buckets).toEqual({
      state: 'cmesh_default',
      jobs: 'cmesh_jobs',
      claims: 'cmesh_job_claims',
      replicas: 'cmesh_coordinator_replicas',
      scans: 'cmesh_scans',
      idempotency: 'cmesh_idempotency',
    });
    expect(n.jobStorePrefix('j1', 'r1')).toBe('cmesh_store_jobs_j1-r1');
    expect(n.stores.open).toBe('cmesh.stores.open');
    // the exported constants are the default cluster's
    expect([AGENT_SUBJECTS.heartbeatWildcard, GROUP_SUBJECTS.get, RDZV_SUBJECTS.leave, JOB_SUBJECTS.submit]).toEqual([
      'cmesh.agents.heartbeat.*',
      'cmesh.groups.get',
      'cmesh.rdzv.leave',
      'cmesh.jobs.submit',
    ]);
    expect(clusterNames()).toMatchObject({ cluster: 'default', buckets: n.buckets });
  });

  it('puts any other cluster into every subject and bucket', () => {
    const n = clusterNames('lab-2');
    expect(n.agents.register('a0')).toBe('cmesh.lab-2.agents.register.a0');
    expect(n.agents.events('a0')).toBe('cmesh.lab-2.agents.events.a0');
    expect(n.groups.list).toBe('cmesh.lab-2.groups.list');
    expect(n.rdzv.leave).toBe('cmesh.lab-2.rdzv.leave');
    expect(n.jobs.start('a0')).toBe('cmesh.lab-2.jobs.start.a0');
    expect(n.jobs.events('j1', 'a0')).toBe('cmesh.lab-2.jobs.events.j1.a0');
    expect([n.scans.run, n.scans.get, n.scans.list]).toEqual(['cmesh.lab-2.scans.run', 'cmesh.lab-2.scans.get', 'cmesh.lab-2.scans.list']);
    expect(n.buckets).toEqual({
      state: 'cmesh_lab-2',
      jobs: 'cmesh_lab-2_jobs',
      claims: 'cmesh_lab-2_job_claims',
      replicas: 'cmesh_lab-2_coordinator_replicas',
      scans: 'cmesh_lab-2_scans',
      idempotency: 'cmesh_lab-2_idempotency',
    });
    expect(n.jobStorePrefix('j1', 'r1')).toBe('cmesh_lab-2_store_jobs_j1-r1');
    expect(n.stores.open).toBe('cmesh.lab-2.stores.open');
  });

  it("knows its own store buckets and no other cluster's or kind's", () => {
    const def = clusterNames();
    const lab = clusterNames('lab');
    expect(def.stores.parse(def.stores.bucket('svc', 'g-1'))).toEqual({ kind: 'svc', id: 'g-1' });
    expect(lab.stores.parse(lab.stores.bucket('rdzv', 'abc'))).toEqual({ kind: 'rdzv', id: 'abc' });
    expect(def.stores.parse(lab.stores.bucket('rdzv', 'abc'))).toBeNull();
    expect(lab.stores.parse(def.stores.bucket('rdzv', 'abc'))).toBeNull();
    expect(lab.stores.parse(clusterNames('lab-2').stores.bucket('jobs', 'abc'))).toBeNull();
    for (const other of [
      def.buckets.state,
      def.buckets.jobs,
      'cmesh_store_other_x',
      'cmesh_store_jobs_a_b',
      'cmesh_store_store_jobs_x',
      'KV_cmesh_store_jobs_x',
    ])
      expect(def.stores.parse(other)).toBeNull();
    expect(() => def.stores.bucket('jobs', 'a_b')).toThrow(/letters, digits and -/);
  });

  it('no name of one cluster is a name of another', () => {
    const clusters = [DEFAULT_CLUSTER, 'a', 'job', 'coordinator', 'lab', 'lab-jobs', 'lab-2', 'A', 'events', 'cmesh'];
    const owner = new Map<string, string>();
    for (const c of clusters) {
      for (const name of allNames(c)) {
        expect(`${name}: ${owner.get(name) ?? c}`).toBe(`${name}: ${c}`);
        owner.set(name, c);
      }
    }
  });

  it('refuses a name that is not one NATS token and bucket segment, or is reserved, with a typed error', () => {
    for (const bad of ['', 'a.b', 'a*', 'a>', 'a b', 'a_b', 'x'.repeat(65), 'ä']) {
      expect(() => clusterNames(bad)).toThrow(InvalidClusterNameError);
      expect(() => checkClusterName(bad)).toThrow(`cluster name ${JSON.stringify(bad)}: letters, digits and - only (1..64)`);
    }
    for (const r of RESERVED_CLUSTER_NAMES) expect(() => checkClusterName(r)).toThrow(/reserved/);
    const e = (() => {
      try {
        checkClusterName('a.b');
      } catch (err) {
        return err as InvalidClusterNameError;
      }
    })();
    expect([e?.name, e?.code, e?.cluster]).toEqual(['InvalidClusterNameError', 'INVALID_CLUSTER_NAME', 'a.b']);
    expect(checkClusterName('Prod-01')).toBe('Prod-01');
  });
});

describe('clusterSubject', () => {
  it('names a subject of the cluster by `<area>.<name>`, one made for an id with the id', () => {
    const lab = clusterNames('lab');
    expect(clusterSubject(lab, 'agents.registerWildcard')).toBe('cmesh.lab.agents.register.*');
    expect(clusterSubject(lab, 'jobs.eventsWildcard')).toBe('cmesh.lab.jobs.events.*.*');
    expect(clusterSubject(lab, 'jobs.start', 'a0')).toBe('cmesh.lab.jobs.start.a0');
    expect(clusterSubject(clusterNames(), 'agents.events', 'a0')).toBe('cmesh.agents.events.a0');
    expect(() => clusterSubject(lab, 'agents.events')).toThrow('no subject for NATS pattern "agents.events" without an id');
    expect(() => clusterSubject(lab, 'agents.nope')).toThrow('no subject for NATS pattern "agents.nope"');
    expect(() => clusterSubject(lab, 'buckets.jobs')).toThrow('no subject');
    expect(() => clusterSubject(lab, 'agents.register.x')).toThrow('no subject');
  });
});
