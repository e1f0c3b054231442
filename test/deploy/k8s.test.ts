// k8s/ (kustomize base + GPU overlay), rendered and checked without a cluster: against the
// upstream API schemas (kubernetes-models), strictly (no field the API lacks), against
// `kubectl kustomize` where kubectl is installed, and for what the deployment needs to work:
// selectors, ports, probes, ConfigMaps, the sidecar's GPU, socket and /dev/shm.
import { execFileSync, spawnSync } from 'child_process';
import { readFileSync } from 'fs';
import { join, resolve } from 'path';
import { load, loadAll } from 'js-yaml';
import { K8sObject, byKey, keyOf, renderKustomization } from './support/kustomize';
import { strictFieldErrors } from './support/strict-fields';

const ROOT = resolve(__dirname, '../..');
const BASE = join(ROOT, 'k8s/base');
const GPU = join(ROOT, 'k8s/overlays/gpu');
const base = renderKustomization(BASE);
const gpu = renderKustomization(GPU);

const podSpec = (o: K8sObject) => o.spec.template.spec;
const container = (o: K8sObject, name: string) => podSpec(o).containers.find((c: { name: string }) => c.name === name);
const volume = (o: K8sObject, name: string) => podSpec(o).volumes.find((v: { name: string }) => v.name === name);
const limitsOf = (c: any) => ({ ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) });

it('renders the same objects as kubectl kustomize (where kubectl is installed)', () => {
  expect(base.map(keyOf)).toEqual([
    'Namespace/cmesh',
    'ConfigMap/cmesh',
    'ConfigMap/cmesh-agent',
    'ConfigMap/nats',
    'Service/nats',
    'Service/nats-headless',
    'StatefulSet/nats',
    'Service/coordinator',
    'Service/coordinator-pods',
    'Deployment/coordinator',
    'Service/rank-agent',
    'StatefulSet/rank-agent',
  ]);
  expect(gpu.map(keyOf)).toEqual(base.map(keyOf));
  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  if (kubectl.status !== 0) {
    console.warn('kubectl not installed: the rendering is checked by this test alone');
    return;
  }
  for (const [dir, mine] of [
    [BASE, base],
    [GPU, gpu],
  ] as const) {
    const theirs = byKey(loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as K8sObject[]);
    expect([...theirs.keys()].sort()).toEqual(mine.map(keyOf).sort());
    for (const o of mine) expect([keyOf(o), o]).toEqual([keyOf(o), theirs.get(keyOf(o))]);
  }
}, 30_000);

it('validates against the Kubernetes API schemas, strictly', () => {
  const all = [...base, ...gpu];
  const results = JSON.parse(execFileSync(process.execPath, [join(__dirname, 'support/validate-k8s.mjs')], { cwd: ROOT, input: JSON.stringify(all), encoding: 'utf8' }));
  expect(results).toHaveLength(all.length);
  for (const r of results) expect(r).toEqual({ key: r.key, error: null });
  // one tsc run: the manifests, plus a copy with a misspelt field that must be the only error
  const typo = structuredClone(byKey(base).get('Deployment/coordinator')!);
  typo.spec.replica = 2;
  const errors = strictFieldErrors([...all, typo]);
  expect(errors).toHaveLength(1);
  expect(errors[0]).toMatch(/'"replica"' does not exist in type 'IDeploymentSpec'/);
}, 60_000);

it('the schema check catches a wrong type', () => {
  const bad = structuredClone(byKey(base).get('StatefulSet/rank-agent')!);
  bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
  const [r] = JSON.parse(execFileSync(process.execPath, [join(__dirname, 'support/validate-k8s.mjs')], { cwd: ROOT, input: JSON.stringify([bad]), encoding: 'utf8' }));
  expect(r.error).toMatch(/containerPort must be integer/);
}, 30_000);

describe.each([
  ['base', base],
  ['gpu overlay', gpu],
])('%s', (_name, objs) => {
  const by = byKey(objs);

  it('puts everything in the cmesh namespace; Services select pods and name ports that exist', () => {
    for (const o of objs) expect([keyOf(o), o.metadata.namespace]).toEqual([keyOf(o), o.kind === 'Namespace' ? undefined : 'cmesh']);
    const workloads = objs.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');
    for (const s of objs.filter((o) => o.kind === 'Service')) {
      const pods = workloads.filter((w) => Object.entries(s.spec.selector).every(([k, v]) => w.spec.template.metadata.labels[k] === v));
      expect([keyOf(s), pods.length]).toEqual([keyOf(s), 1]);
      const portNames = podSpec(pods[0]).containers.flatMap((c: any) => (c.ports ?? []).map((p: any) => p.name));
      for (const p of s.spec.ports) expect([keyOf(s), p.targetPort, portNames.includes(p.targetPort)]).toEqual([keyOf(s), p.targetPort, true]);
    }
    for (const w of workloads) expect([keyOf(w), w.spec.selector.matchLabels]).toEqual([keyOf(w), expect.objectContaining(w.spec.selector.matchLabels)]);
    for (const w of workloads) for (const [k, v] of Object.entries(w.spec.selector.matchLabels)) expect(w.spec.template.metadata.labels[k]).toBe(v);
  });

  it('every container has readiness and liveness probes on real ports/paths; ConfigMaps exist', () => {
    for (const w of objs.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet')) {
      for (const c of podSpec(w).containers) {
        for (const probe of ['readinessProbe', 'livenessProbe']) {
          const p = c[probe];
          expect([keyOf(w), c.name, probe, !!p]).toEqual([keyOf(w), c.name, probe, true]);
          if (p.httpGet) {
            expect((c.ports ?? []).map((x: any) => x.name)).toContain(p.httpGet.port);
            expect(p.httpGet.path).toMatch(/^\/(health|healthz)(\?.*)?$/);
          } else expect(p.exec.command.length).toBeGreaterThan(0);
        }
        for (const e of c.envFrom ?? []) expect([c.name, by.has(`ConfigMap/${e.configMapRef.name}`)]).toEqual([c.name, true]);
        expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
      }
      expect(podSpec(w).securityContext.runAsNonRoot).toBe(true);
      for (const v of podSpec(w).volumes ?? []) if (v.configMap) expect(by.has(`ConfigMap/${v.configMap.name}`)).toBe(true);
    }
  });

  it('NATS is a StatefulSet with JetStream on its persistent volume', () => {
    const nats = by.get('StatefulSet/nats')!;
    expect(nats.spec.serviceName).toBe('nats-headless');
    expect(by.get('Service/nats-headless')!.spec.clusterIP).toBe('None');
    const data = nats.spec.volumeClaimTemplates.find((v: any) => v.metadata.name === 'data');
    expect(data.spec.resources.requests.storage).toMatch(/Gi$/);
    const mount = container(nats, 'nats').volumeMounts.find((m: any) => m.name === 'data').mountPath;
    const conf = by.get('ConfigMap/nats')!.data['nats.conf'];
    expect(conf).toMatch(new RegExp(`jetstream \\{[^}]*store_dir: ${mount}`));
    expect(container(nats, 'nats').args).toEqual(['--config', '/etc/nats/nats.conf']);
    // the apps' NATS_URL points at the client Service
    expect(by.get('ConfigMap/cmesh')!.data.NATS_URL).toBe(`nats://nats:${by.get('Service/nats')!.spec.ports[0].port}`);
  });

  it('the coordinator is a Deployment behind a Service, scraped by annotation', () => {
    const d = by.get('Deployment/coordinator')!;
    expect(d.spec.replicas).toBeGreaterThanOrEqual(2); // a second replica takes over (leader lease)
    const c = container(d, 'coordinator');
    const ann = d.spec.template.metadata.annotations;
    expect(ann).toEqual({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '7700', 'prometheus.io/path': '/metrics' });
    expect(c.ports.map((p: any) => p.containerPort)).toContain(Number(ann['prometheus.io/port']));
    expect(c.env.find((e: any) => e.name === 'HTTP_PORT').value).toBe('7700');
    expect(c.env.find((e: any) => e.name === 'HTTP_HOST').value).toBe('0.0.0.0');
  });

  it('agents are a StatefulSet with stable names behind a headless Service, with a memory /dev/shm', () => {
    const s = by.get('StatefulSet/rank-agent')!;
    const svc = by.get('Service/rank-agent')!;
    expect(s.spec.serviceName).toBe('rank-agent');
    expect(svc.spec.clusterIP).toBe('None');
    const agent = container(s, 'agent');
    expect(agent.env.find((e: any) => e.name === 'CMESH_AGENT_NAME').valueFrom.fieldRef.fieldPath).toBe('metadata.name');
    expect(agent.env.find((e: any) => e.name === 'CMESH_AGENT_HOST').valueFrom.fieldRef.fieldPath).toBe('status.podIP');
    const cfg = by.get('ConfigMap/cmesh-agent')!.data;
    const ann = s.spec.template.metadata.annotations;
    expect(ann['prometheus.io/port']).toBe(cfg.CMESH_HTTP_PORT);
    expect(agent.ports.find((p: any) => p.name === 'http').containerPort).toBe(Number(cfg.CMESH_HTTP_PORT));
    expect(agent.ports.find((p: any) => p.name === 'job-metrics').containerPort).toBe(Number(cfg.CMESH_METRICS_PORT));
    expect(agent.ports.find((p: any) => p.name === 'data').containerPort).toBe(Number(cfg.CMESH_DATA_PORTS.split('-')[0]));
    expect(volume(s, 'dshm').emptyDir.medium).toBe('Memory');
    expect(agent.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
    expect(limitsOf(agent)['nvidia.com/gpu']).toBeUndefined();
  });

  it('the in-cluster Prometheus config scrapes the Services these manifests define', () => {
    const cfg = load(readFileSync(join(ROOT, 'dashboards/prometheus/prometheus-k8s.yml'), 'utf8')) as any;
    const jobs = Object.fromEntries(cfg.scrape_configs.map((j: any) => [j.job_name, j]));
    // every replica, through the headless Service that selects the coordinator pods
    const pods = by.get('Service/coordinator-pods')!;
    expect(pods.spec.clusterIP).toBe('None');
    expect(pods.spec.selector).toEqual(by.get('Deployment/coordinator')!.spec.selector.matchLabels);
    expect(jobs['cmesh-coordinator'].dns_sd_configs[0]).toMatchObject({ names: ['coordinator-pods.cmesh.svc.cluster.local'], type: 'A', port: pods.spec.ports[0].port });
    const agentCfg = by.get('ConfigMap/cmesh-agent')!.data;
    expect(jobs['cmesh-agent'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent.cmesh.svc.cluster.local'], type: 'A', port: Number(agentCfg.CMESH_HTTP_PORT) });
    expect(jobs['cmesh-job'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent.cmesh.svc.cluster.local'], port: Number(agentCfg.CMESH_METRICS_PORT) });
  });
});

it('GPU overlay: the nccl-sidecar alone requests the GPU, shares the socket dir and /dev/shm with the agent', () => {
  const s = byKey(gpu).get('StatefulSet/rank-agent')!;
  const names = podSpec(s).containers.map((c: any) => c.name);
  expect(names).toEqual(['agent', 'nccl-sidecar']);
  const agent = container(s, 'agent');
  const sidecar = container(s, 'nccl-sidecar');
  expect(limitsOf(sidecar)['nvidia.com/gpu']).toBe(1);
  expect(limitsOf(agent)['nvidia.com/gpu']).toBeUndefined();
  expect(volume(s, 'nccl-socket')).toEqual({ name: 'nccl-socket', emptyDir: {} });
  const sockDir = (c: any) => c.volumeMounts.find((m: any) => m.name === 'nccl-socket').mountPath;
  expect(sockDir(agent)).toBe(sockDir(sidecar));
  const cfg = byKey(gpu).get('ConfigMap/cmesh-agent')!.data;
  expect(cfg.CMESH_NCCL).toBe('1');
  expect(cfg.CMESH_NCCL_SOCKET.startsWith(sockDir(agent) + '/')).toBe(true);
  expect(sidecar.args).toEqual(['--socket', cfg.CMESH_NCCL_SOCKET]);
  expect(sidecar.readinessProbe.exec.command).toEqual(['test', '-S', cfg.CMESH_NCCL_SOCKET]);
  for (const c of [agent, sidecar]) expect(c.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
  expect(volume(s, 'dshm').emptyDir).toEqual({ medium: 'Memory', sizeLimit: '8Gi' });
  expect(podSpec(s).tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
  // the base stays CPU-only
  expect(byKey(base).get('ConfigMap/cmesh-agent')!.data.CMESH_NCCL).toBe('0');
  expect(podSpec(byKey(base).get('StatefulSet/rank-agent')!).containers).toHaveLength(1);
});
