// NATS in k8s/base as NATS runs in production (its Helm chart the reference): a StatefulSet of
// three servers started together, one per node, routing to each other on 6222 with a route login
// of their own, a PodDisruptionBudget of one, lame duck mode before SIGTERM, startup / liveness /
// readiness probes on the paths the chart uses, GOMEMLIMIT below the memory limit, JetStream limits
// below the memory and the volume; the coordinator spread over nodes, the agents with a
// PodDisruptionBudget. Then live: three real nats-servers with the ConfigMap's nats.conf and the
// files `cmesh secrets k8s` puts in the Secret (pod names mapped to loopback ports) form a
// JetStream cluster; a server with another route password is refused; the probes' paths answer as
// the probes need; the preStop command puts a server in lame duck mode and the pod's SIGTERM that
// follows does not cut it short.
import { spawn, spawnSync, ChildProcess } from 'child_process';
import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';
import { loadAll } from 'js-yaml';
import { connect } from '@nats-io/transport-node';
import { K8sObject, byKey, renderKustomization } from './support/kustomize';
import { writeLocalNatsPod } from './support/nats-pod';
import { accepts, freePort, waitForPort } from '@cmesh/testing';
import { K8S_ROUTE_PASSWORD_KEY, K8S_SECRETS, k8sSecrets, ROUTE_PASSWORD_NOT_KEPT, secretValues } from '@cmesh/cli/commands';

const ROOT = resolve(__dirname, '../..');
const base = byKey(renderKustomization(join(ROOT, 'k8s/base')));
const sts = base.get('StatefulSet/nats')!;
const pod = sts.spec.template.spec;
const nats = pod.containers.find((c: { name: string }) => c.name === 'nats');
const natsConf = base.get('ConfigMap/nats')!.data['nats.conf'] as string;
const confValue = (key: string) => new RegExp(`^\\s*${key}: (\\S+)$`, 'm').exec(natsConf)?.[1];
const seconds = (v: string) => Number(/^(\d+)s$/.exec(v)![1]);
/** Kubernetes / NATS quantities in bytes: 2Gi, 1843MiB, 512M, 8G */
const bytes = (v: string) => {
  const m = /^(\d+)(Ki|Mi|Gi|KiB|MiB|GiB|K|M|G)?$/.exec(v)!;
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
};
const secrets = (o: Partial<Parameters<typeof k8sSecrets>[0]> = {}) =>
  byKey(loadAll(k8sSecrets({ agents: 2, tenants: [], namespace: 'cmesh', ...o })) as K8sObject[]);
const natsSecret = (o: Partial<Parameters<typeof k8sSecrets>[0]> = {}) =>
  Object.fromEntries(
    Object.entries(secrets(o).get(`Secret/${K8S_SECRETS.nats}`)!.data as Record<string, string>).map(([k, v]) => [
      k,
      Buffer.from(v, 'base64').toString('utf8'),
    ]),
  );

describe('NATS in k8s/base: a cluster of three', () => {
  it('a StatefulSet of 3 started in parallel, one server per node, routes on 6222 through the headless Service (published before ready)', () => {
    expect(sts.spec.replicas).toBe(3);
    expect(sts.spec.podManagementPolicy).toBe('Parallel');
    expect(nats.ports).toContainEqual({ name: 'cluster', containerPort: 6222 });
    expect(confValue('port')).toBe('4222');
    expect(natsConf).toMatch(/cluster \{\n\s+name: cmesh\n\s+port: 6222\n/);
    const headless = base.get(`Service/${sts.spec.serviceName}`)!;
    expect(headless.spec.clusterIP).toBe('None');
    expect(headless.spec.publishNotReadyAddresses).toBe(true);
    expect(headless.spec.ports).toContainEqual({ name: 'cluster', port: 6222, targetPort: 'cluster' });
    // server_name is the pod's name (JetStream's peers are known by it)
    expect(confValue('server_name')).toBe('$SERVER_NAME');
    expect(nats.env).toContainEqual({ name: 'SERVER_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } });
    expect(pod.topologySpreadConstraints).toEqual([
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: sts.spec.selector.matchLabels } },
    ]);
  });

  it("probes as NATS's Helm chart: startup on /healthz with minutes to recover, liveness on js-enabled-only, readiness on js-server-only", () => {
    expect(nats.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'monitor' });
    expect(nats.startupProbe.failureThreshold * nats.startupProbe.periodSeconds).toBeGreaterThanOrEqual(600);
    expect(nats.livenessProbe.httpGet).toEqual({ path: '/healthz?js-enabled-only=true', port: 'monitor' });
    expect(nats.readinessProbe.httpGet).toEqual({ path: '/healthz?js-server-only=true', port: 'monitor' });
    expect(nats.ports).toContainEqual({ name: 'monitor', containerPort: Number(confValue('http_port')) });
  });

  it('preStop puts the server in lame duck mode (its pid file on a writable volume) and the grace period outlasts it', () => {
    const pidFile = confValue('pid_file')!;
    expect(nats.lifecycle.preStop.exec.command).toEqual(['nats-server', '--signal', `ldm=${pidFile}`]);
    const mount = nats.volumeMounts.find((m: { mountPath: string }) => pidFile.startsWith(m.mountPath + '/'));
    expect(pod.volumes.find((v: { name: string }) => v.name === mount.name).emptyDir).toBeDefined();
    const ldm = seconds(confValue('lame_duck_duration')!);
    expect(ldm).toBeGreaterThanOrEqual(30); // nats-server's minimum
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(ldm + seconds(confValue('lame_duck_grace_period')!));
  });

  it('GOMEMLIMIT is 90 % of the memory limit; JetStream holds less than it in memory and less than the volume on disk', () => {
    const limit = bytes(nats.resources.limits.memory);
    const gomem = bytes(nats.env.find((e: { name: string }) => e.name === 'GOMEMLIMIT').value);
    expect(gomem / limit).toBeGreaterThan(0.85);
    expect(gomem / limit).toBeLessThanOrEqual(0.9);
    expect(bytes(confValue('max_memory_store')!)).toBeLessThan(gomem);
    const volume = sts.spec.volumeClaimTemplates.find((v: K8sObject) => v.metadata.name === 'data');
    expect(bytes(confValue('max_file_store')!)).toBeLessThan(bytes(volume.spec.resources.requests.storage));
    expect(nats.volumeMounts).toContainEqual({ name: 'data', mountPath: confValue('store_dir') });
  });

  it('disruption budgets: NATS and the agents one pod at a time; coordinator replicas spread over nodes, replaced one at a time', () => {
    for (const [pdb, workload] of [
      ['PodDisruptionBudget/nats', 'StatefulSet/nats'],
      ['PodDisruptionBudget/rank-agent', 'StatefulSet/rank-agent'],
    ]) {
      const p = base.get(pdb)!;
      expect([pdb, p.spec.maxUnavailable, p.spec.selector.matchLabels]).toEqual([pdb, 1, base.get(workload)!.spec.selector.matchLabels]);
    }
    const d = base.get('Deployment/coordinator')!;
    const labels = d.spec.selector.matchLabels;
    expect(d.spec.template.spec.topologySpreadConstraints).toEqual([
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: labels } },
    ]);
    expect(d.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm).toEqual({
      topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: labels },
    });
    expect(d.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });

  it('the NetworkPolicy admits the route port from NATS pods only', () => {
    const rules = base.get('NetworkPolicy/nats')!.spec.ingress as { from?: unknown[]; ports: { port: string }[] }[];
    const route = rules.filter((r) => r.ports.some((p) => p.port === 'cluster'));
    expect(route).toEqual([{ from: [{ podSelector: { matchLabels: sts.spec.selector.matchLabels } }], ports: [{ protocol: 'TCP', port: 'cluster' }] }]);
  });

  it('cmesh secrets k8s: routes.conf routes to every pod with the route login; --nats-replicas; --keep keeps the route password, and says so when it cannot', () => {
    const s = natsSecret();
    const password = s[K8S_ROUTE_PASSWORD_KEY];
    expect(password.length).toBeGreaterThanOrEqual(32);
    expect(s['routes.conf']).toContain(`authorization: ${JSON.stringify({ user: 'route', password })}`);
    const routes = (text: string) => [...text.matchAll(/"nats-route:\/\/route:([^@]+)@([^"]+)"/g)].map((m) => [m[1], m[2]]);
    expect(routes(s['routes.conf'])).toEqual([0, 1, 2].map((i) => [password, `nats-${i}.nats-headless:6222`]));
    expect(routes(natsSecret({ natsReplicas: 5 })['routes.conf']).map((r) => r[1])).toEqual([0, 1, 2, 3, 4].map((i) => `nats-${i}.nats-headless:6222`));
    // a fresh run makes a fresh one: a server started with it would be refused by the others
    expect(natsSecret()[K8S_ROUTE_PASSWORD_KEY]).not.toBe(password);
    const applied = {
      kind: 'List',
      items: [...secrets().values()].map((x) => ({
        kind: 'Secret',
        metadata: x.metadata,
        data: { ...x.data, [K8S_ROUTE_PASSWORD_KEY]: Buffer.from(password).toString('base64') },
      })),
    };
    expect(natsSecret({ keep: secretValues(JSON.stringify(applied), 'test') })[K8S_ROUTE_PASSWORD_KEY]).toBe(password);
    // through the CLI: a --keep without the route password says what that means
    const cli = (keep: object) =>
      spawnSync(process.execPath, [join(ROOT, 'apps/cli/bin/cmesh.js'), 'secrets', 'k8s', '--keep', '-'], {
        input: JSON.stringify(keep),
        encoding: 'utf8',
        timeout: 60_000,
      });
    const without = cli({
      ...applied,
      items: applied.items.map((x) => ({ ...x, data: Object.fromEntries(Object.entries(x.data).filter(([k]) => k !== K8S_ROUTE_PASSWORD_KEY)) })),
    });
    expect([without.status, without.stderr]).toEqual([0, ROUTE_PASSWORD_NOT_KEPT]);
    const kept = cli(applied);
    expect([kept.status, kept.stderr]).toEqual([0, '']);
    expect(kept.stdout).toContain(Buffer.from(password).toString('base64'));
    // no client login is the route login
    expect(JSON.parse(s['auth.conf'].replace(/^authorization: /, '')).users.map((u: { user: string }) => u.user)).not.toContain('route');
  });
});

describe('live: three nats-servers with the pod configuration', () => {
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  const start = (conf: string, name: string, port: number, monitor: number) => {
    const p = spawn('nats-server', ['--config', conf, '-a', '127.0.0.1', '-p', String(port), '-m', String(monitor)], {
      stdio: 'ignore',
      env: { ...process.env, SERVER_NAME: name },
    });
    procs.push(p);
    return p;
  };
  afterAll(() => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('form one JetStream cluster; a server with another route password is refused; probes answer; preStop drains a server despite SIGTERM', async () => {
    const files = natsSecret();
    const secretFiles = { 'auth.conf': files['auth.conf'], 'routes.conf': files['routes.conf'] };
    const launch = async () => {
      const pods = await Promise.all(
        [0, 1, 2].map(async (i) => ({
          name: `nats-${i}`,
          port: await freePort(),
          monitor: await freePort(),
          clusterPort: await freePort(),
          dir: mkdtempSync(join(tmpdir(), `cmesh-k8s-nats-${i}-`)),
        })),
      );
      dirs.push(...pods.map((p) => p.dir));
      const routeTo = new Map(pods.map((p) => [`${p.name}.nats-headless`, p.clusterPort]));
      const servers = pods.map((p) =>
        start(writeLocalNatsPod({ natsConf, secretFiles, dir: p.dir, clusterPort: p.clusterPort, routeTo }), p.name, p.port, p.monitor),
      );
      const up = await Promise.all(pods.map((p) => waitForPort(p.port, 10_000)));
      return { pods, servers, up, routeTo };
    };
    let { pods, servers, up, routeTo } = await launch();
    // a port another test took between its choice here and the server's bind: again, on new ports
    if (!up.every(Boolean)) {
      for (const p of servers) p.kill('SIGKILL');
      ({ pods, servers, up, routeTo } = await launch());
    }
    expect(up).toEqual([true, true, true]);
    const get = async (p: { monitor: number }, path: string) => {
      const r = await fetch(`http://127.0.0.1:${p.monitor}${path}`);
      return { status: r.status, body: (await r.json()) as Record<string, any> };
    };
    let metas: Record<string, any>[] = [];
    for (const end = Date.now() + 30_000; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
      metas = await Promise.all(pods.map(async (p) => (await get(p, '/jsz')).body.meta_cluster ?? {}));
      if (new Set(metas.map((m) => m.leader)).size === 1 && metas[0].leader && metas.every((m) => m.cluster_size === 3)) break;
    }
    expect(metas.map((m) => [m.leader, m.cluster_size])).toEqual(metas.map(() => [metas[0].leader, 3]));
    expect(pods.map((p) => p.name)).toContain(metas[0].leader);
    // every path a probe uses answers 200 on a server of a whole cluster
    for (const path of [nats.startupProbe, nats.livenessProbe, nats.readinessProbe].map((x) => x.httpGet.path)) {
      for (const p of pods) expect([p.name, path, (await get(p, path)).status]).toEqual([p.name, path, 200]);
    }

    // a fourth server whose routes.conf comes from another `cmesh secrets k8s` run (another route password)
    const intruder = {
      name: 'nats-3',
      port: await freePort(),
      monitor: await freePort(),
      clusterPort: await freePort(),
      dir: mkdtempSync(join(tmpdir(), 'cmesh-k8s-nats-x-')),
    };
    dirs.push(intruder.dir);
    const other = natsSecret({ natsReplicas: 4 });
    start(
      writeLocalNatsPod({
        natsConf,
        secretFiles: { 'auth.conf': files['auth.conf'], 'routes.conf': other['routes.conf'] },
        dir: intruder.dir,
        clusterPort: intruder.clusterPort,
        routeTo: new Map([...routeTo, ['nats-3.nats-headless', intruder.clusterPort]]),
      }),
      intruder.name,
      intruder.port,
      intruder.monitor,
    );
    expect(await waitForPort(intruder.port, 10_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 3000));
    expect((await get(pods[0], '/routez')).body.num_routes).toBe(2);
    expect((await get(intruder, '/routez')).body.num_routes).toBe(0);
    // alone, it is alive (liveness) but not started or ready: the kubelet waits instead of restarting it
    expect((await get(intruder, nats.livenessProbe.httpGet.path)).status).toBe(200);
    expect((await get(intruder, nats.startupProbe.httpGet.path)).status).toBe(503);
    expect((await get(intruder, nats.readinessProbe.httpGet.path)).status).toBe(503);

    // preStop, then the kubelet's SIGTERM at once: the server stays in lame duck mode until its clients are gone
    const client =
      files['auth.conf'] && JSON.parse(files['auth.conf'].replace(/^authorization: /, '')).users.find((u: { user: string }) => u.user === 'client');
    const clients = await Promise.all([0, 1, 2].map(() => connect({ servers: `nats://127.0.0.1:${pods[2].port}`, user: 'client', pass: client.password })));
    const pidFile = join(pods[2].dir, 'nats.pid');
    const t0 = Date.now();
    const [cmd, ...args] = nats.lifecycle.preStop.exec.command as string[];
    const r = spawnSync(
      cmd,
      args.map((a) => a.replace(confValue('pid_file')!, pidFile)),
      { encoding: 'utf8' },
    );
    expect([r.status, r.stderr]).toEqual([0, '']);
    // the hook returns once the signal is sent; the server enters lame duck mode a moment later and
    // then refuses new clients. The kubelet's round trips before its SIGTERM take longer than that;
    // on a loaded machine this test's do not, so it waits for the refusal, at most 5 s
    for (const end = Date.now() + 5000; Date.now() < end && (await accepts(pods[2].port)); ) await new Promise((res) => setTimeout(res, 20));
    servers[2].kill('SIGTERM');
    const exited = new Promise<number>((res) => servers[2].once('exit', () => res(Date.now() - t0)));
    const ms = await exited;
    const grace = seconds(confValue('lame_duck_grace_period')!) * 1000;
    expect(ms).toBeGreaterThanOrEqual(grace);
    expect(ms).toBeLessThan(pod.terminationGracePeriodSeconds * 1000);
    for (const c of clients) await c.close().catch(() => undefined);
    // the other two keep the cluster: a meta leader among them
    let leader: string | undefined;
    for (const end = Date.now() + 20_000; !leader && Date.now() < end; await new Promise((res) => setTimeout(res, 250)))
      leader = (await get(pods[0], '/jsz')).body.meta_cluster?.leader;
    expect(['nats-0', 'nats-1']).toContain(leader);
    expect(readFileSync(join(pods[0].dir, 'nats.conf'), 'utf8')).toContain(`port: ${pods[0].clusterPort}`);
  }, 120_000);
});
