// k8s/ (kustomize base + every overlay), rendered and checked without a cluster: by the real
// `kubectl kustomize` (skipped, saying so, where kubectl is not installed) and by this test's own
// renderer, the two compared object by object; against the upstream API schemas
// (kubernetes-models), strictly (no field the API lacks); and for what the deployment needs to
// work and operators expect: selectors, ports, probes, ConfigMaps, the sidecar's GPU, socket and
// /dev/shm, seccomp, read-only root filesystems, no service account token, a
// PodDisruptionBudget, NetworkPolicies that admit exactly the ports in use, an images: block
// with the registry a placeholder the user sets, NATS scraped through its exporter; the
// monitoring overlay's ServiceMonitor, PodMonitors and PrometheusRule against the operator's
// schemas; the examples of k8s/examples/ (rendered, valid, their images from the user's
// registry); and the documents' quickstart applied in order to an empty cluster (modelled: no
// cluster runs here), the Secrets server-side.
import { execFileSync, spawn, spawnSync } from 'child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { dirname, join, relative, resolve } from 'path';
import { load, loadAll } from 'js-yaml';
import { connect } from '@nats-io/transport-node';
import { AuthorizationError, NatsConnection } from '@nats-io/nats-core';
import { K8sObject, applyImages, byKey, keyOf, renderKustomization, splitImage } from './support/kustomize';
import { strictFieldErrors } from './support/strict-fields';
import { writeLocalNatsPod } from './support/nats-pod';
import { clusterNames, deploymentNatsUsers, natsAuthorization, subjectCovers } from '@cmesh/protocol';
import { freePort, waitForPort } from '@cmesh/testing';
import { K8S_AGENT_STATEFULSET, K8S_API_TOKEN_KEY, K8S_SECRETS, K8S_SECRETS_APPLY, k8sSecrets, natsPasswordKey, secretValues } from '@cmesh/cli/commands';
import { PROMETHEUS_RULE_PATH, prometheusRuleYaml } from '../../dashboards/prometheus/generate-prometheus-rule';

const ROOT = resolve(__dirname, '../..');
const BASE = join(ROOT, 'k8s/base');
const GPU = join(ROOT, 'k8s/overlays/gpu');
const RDMA = join(ROOT, 'k8s/overlays/rdma');
const base = renderKustomization(BASE);
const gpu = renderKustomization(GPU);
const rdma = renderKustomization(RDMA);
const OVERLAYS = readdirSync(join(ROOT, 'k8s/overlays')).map((d) => join(ROOT, 'k8s/overlays', d));
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
if (!hasKubectl) console.warn('kubectl not installed (apt-get install kubectl): the kubectl kustomize tests are skipped');
const itKubectl = hasKubectl ? it : it.skip;
const validate = (objs: K8sObject[]) =>
  JSON.parse(execFileSync(process.execPath, [join(__dirname, 'support/validate-k8s.mjs')], { cwd: ROOT, input: JSON.stringify(objs), encoding: 'utf8' })) as {
    key: string;
    error: string | null;
  }[];

const podSpec = (o: K8sObject) => o.spec.template.spec;
const container = (o: K8sObject, name: string) => podSpec(o).containers.find((c: { name: string }) => c.name === name);
const volume = (o: K8sObject, name: string) => podSpec(o).volumes.find((v: { name: string }) => v.name === name);
const limitsOf = (c: any) => ({ ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) });
const WORKLOADS = ['Deployment', 'StatefulSet', 'DaemonSet'];
const isWorkload = (o: K8sObject) => WORKLOADS.includes(o.kind);
/** The agents' workload: the base's StatefulSet, or the GPU overlay's DaemonSet (one pod per GPU node). */
const agentWorkload = (objs: K8sObject[]) => objs.find((o) => isWorkload(o) && o.metadata.name.startsWith('rank-agent'))!;

it('renders the objects of the base and the GPU overlay', () => {
  expect(base.map(keyOf)).toEqual([
    'Namespace/cmesh',
    'ConfigMap/cmesh',
    'ConfigMap/cmesh-agent',
    'ConfigMap/nats',
    'Service/nats',
    'Service/nats-headless',
    'StatefulSet/nats',
    'PodDisruptionBudget/nats',
    'Service/coordinator',
    'Service/coordinator-pods',
    'Deployment/coordinator',
    'PodDisruptionBudget/coordinator',
    'Service/rank-agent',
    'StatefulSet/rank-agent',
    'PodDisruptionBudget/rank-agent',
    'NetworkPolicy/nats',
    'NetworkPolicy/coordinator',
    'NetworkPolicy/rank-agent',
  ]);
  // the GPU overlay: the node-level DaemonSet in place of the StatefulSet; rdma: the same objects
  expect(gpu.map(keyOf)).toEqual([
    ...base.map(keyOf).filter((k) => k !== 'StatefulSet/rank-agent' && k !== 'PodDisruptionBudget/rank-agent'),
    'DaemonSet/rank-agent-gpu',
  ]);
  expect(rdma.map(keyOf)).toEqual(gpu.map(keyOf));
  expect(OVERLAYS).toEqual(expect.arrayContaining([GPU, RDMA]));
});

describe.each([BASE, ...OVERLAYS].map((d) => [d.slice(ROOT.length + 1), d]))('kubectl kustomize %s', (_name, dir) => {
  const render = () => loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as K8sObject[];

  itKubectl(
    'renders the same objects as the test renderer, every one valid against the API schemas',
    () => {
      const theirs = render();
      const mine = renderKustomization(dir);
      expect(theirs.map(keyOf).sort()).toEqual(mine.map(keyOf).sort());
      const by = byKey(theirs);
      for (const o of mine) expect([keyOf(o), o]).toEqual([keyOf(o), by.get(keyOf(o))]);
      for (const r of validate(theirs)) expect(r).toEqual({ key: r.key, error: null });
      expect(strictFieldErrors(theirs)).toEqual([]);
    },
    60_000,
  );

  itKubectl(
    'applies an image override the way the test renderer does',
    () => {
      // an overlay of a user's, naming the placeholder registry the base sets: a registry with a
      // port, a new tag, a digest
      const rules = [
        { name: 'registry.example.com/cmesh/coordinator', newName: 'registry.example.com:5000/cmesh/coordinator', newTag: '9.9.9' },
        { name: 'registry.example.com/cmesh/rank-agent', digest: 'sha256:' + 'a'.repeat(64) },
      ];
      const mine = renderKustomization(dir);
      applyImages(mine, rules);
      const images = (objs: K8sObject[]) =>
        objs.flatMap((o) => (o.spec?.template?.spec?.containers ?? []).map((c: any) => `${keyOf(o)} ${c.name} ${c.image}`)).sort();
      expect(images(mine)).toContain('Deployment/coordinator coordinator registry.example.com:5000/cmesh/coordinator:9.9.9');
      expect(images(mine)).toContain(`${keyOf(agentWorkload(mine))} agent registry.example.com/cmesh/rank-agent@sha256:${'a'.repeat(64)}`);
      const tmp = mkdtempSync(join(ROOT, '.tmp', 'k8s-images-'));
      try {
        writeFileSync(join(tmp, 'kustomization.yaml'), JSON.stringify({ resources: [relative(tmp, dir)], images: rules }));
        const theirs = loadAll(execFileSync('kubectl', ['kustomize', tmp], { encoding: 'utf8' })) as K8sObject[];
        expect(images(theirs)).toEqual(images(mine));
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
    60_000,
  );
});

it('validates against the Kubernetes API schemas, strictly', () => {
  const all = [...base, ...gpu, ...rdma];
  const results = validate(all);
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
  const [r] = JSON.parse(
    execFileSync(process.execPath, [join(__dirname, 'support/validate-k8s.mjs')], { cwd: ROOT, input: JSON.stringify([bad]), encoding: 'utf8' }),
  );
  expect(r.error).toMatch(/containerPort must be integer/);
}, 30_000);

describe.each([
  ['base', base],
  ['gpu overlay', gpu],
  ['rdma overlay', rdma],
])('%s', (_name, objs) => {
  const by = byKey(objs);

  it('puts everything in the cmesh namespace; Services select pods and name ports that exist', () => {
    for (const o of objs) expect([keyOf(o), o.metadata.namespace]).toEqual([keyOf(o), o.kind === 'Namespace' ? undefined : 'cmesh']);
    const workloads = objs.filter((o) => isWorkload(o));
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
    for (const w of objs.filter((o) => isWorkload(o))) {
      for (const c of podSpec(w).containers) {
        for (const probe of ['readinessProbe', 'livenessProbe']) {
          const p = c[probe];
          expect([keyOf(w), c.name, probe, !!p]).toEqual([keyOf(w), c.name, probe, true]);
          if (p.httpGet) {
            expect((c.ports ?? []).map((x: any) => x.name)).toContain(p.httpGet.port);
            expect(p.httpGet.path).toMatch(/^\/(health|healthz)(\?.*)?$/);
          } else if (p.tcpSocket) expect((c.ports ?? []).map((x: any) => x.name)).toContain(p.tcpSocket.port);
          else expect(p.exec.command.length).toBeGreaterThan(0);
        }
        for (const e of c.envFrom ?? []) expect([c.name, by.has(`ConfigMap/${e.configMapRef.name}`)]).toEqual([c.name, true]);
        expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
      }
      expect(podSpec(w).securityContext.runAsNonRoot).toBe(true);
      for (const v of podSpec(w).volumes ?? []) {
        for (const src of [v, ...(v.projected?.sources ?? [])]) {
          if (src.configMap) expect(by.has(`ConfigMap/${src.configMap.name}`)).toBe(true);
          // Secrets are not shipped: `cmesh secrets k8s` makes them
          if (src.secret) expect(Object.values(K8S_SECRETS)).toContain(src.secret.secretName ?? src.secret.name);
        }
      }
    }
  });

  it('hardened pods: RuntimeDefault seccomp, no service account token, read-only root filesystems, writable paths on volumes', () => {
    for (const w of objs.filter((o) => isWorkload(o))) {
      const spec = podSpec(w);
      expect([keyOf(w), spec.automountServiceAccountToken, spec.securityContext.seccompProfile]).toEqual([keyOf(w), false, { type: 'RuntimeDefault' }]);
      const claims = (w.spec.volumeClaimTemplates ?? []).map((v: any) => v.metadata.name);
      for (const c of spec.containers) {
        expect([keyOf(w), c.name, c.securityContext.readOnlyRootFilesystem, c.securityContext.capabilities.drop]).toEqual([keyOf(w), c.name, true, ['ALL']]);
        // every mount is a volume of the pod or a claim of the StatefulSet
        for (const m of c.volumeMounts ?? []) expect([keyOf(w), m.name, !!volume(w, m.name) || claims.includes(m.name)]).toEqual([keyOf(w), m.name, true]);
      }
    }
    // the Node apps keep /tmp writable on an emptyDir
    for (const [k, name] of [
      ['Deployment/coordinator', 'coordinator'],
      [keyOf(agentWorkload(objs)), 'agent'],
    ]) {
      const w = by.get(k)!;
      const tmp = container(w, name).volumeMounts.find((m: any) => m.mountPath === '/tmp');
      expect(volume(w, tmp.name).emptyDir).toBeDefined();
    }
  });

  it('the coordinator: readiness on /health (NATS), liveness without NATS; a PodDisruptionBudget keeps one replica', () => {
    const d = by.get('Deployment/coordinator')!;
    const c = container(d, 'coordinator');
    expect(c.readinessProbe.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(c.livenessProbe.httpGet).toBeUndefined();
    expect(c.livenessProbe.tcpSocket).toEqual({ port: 'http' });
    const pdb = by.get('PodDisruptionBudget/coordinator')!;
    expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
    expect(pdb.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(pdb.spec.minAvailable).toBeLessThan(d.spec.replicas); // a drain can still evict one
  });

  it('NetworkPolicies admit every port a Service or the data plane uses, on the pods that listen', () => {
    const policies = objs.filter((o) => o.kind === 'NetworkPolicy');
    const workloads = objs.filter((o) => isWorkload(o));
    const selects = (sel: Record<string, string>, w: K8sObject) => Object.entries(sel).every(([k, v]) => w.spec.template.metadata.labels[k] === v);
    for (const w of workloads) {
      const mine = policies.filter((p) => selects(p.spec.podSelector.matchLabels, w));
      expect([keyOf(w), mine.length]).toEqual([keyOf(w), 1]);
      expect(mine[0].spec.policyTypes).toEqual(['Ingress']);
      const rules = mine[0].spec.ingress.flatMap((r: any) => r.ports) as { port: string | number; endPort?: number }[];
      const named = podSpec(w)
        .containers.flatMap((c: any) => c.ports ?? [])
        .filter((p: any) => p.name !== 'data') as { name: string; containerPort: number }[];
      // every named port but the data plane's is admitted, by name or by a range of numbers (the
      // GPU pods' per-device ports, the data plane); every name the policy gives is a port of the pod
      const admitted = (p: { name: string; containerPort: number }) =>
        rules.some((r) => r.port === p.name || (typeof r.port === 'number' && r.port <= p.containerPort && p.containerPort <= (r.endPort ?? r.port)));
      expect([keyOf(w), named.filter((p) => !admitted(p)).map((p) => p.name)]).toEqual([keyOf(w), []]);
      expect([keyOf(w), rules.filter((r) => typeof r.port === 'string' && !named.some((p) => p.name === r.port)).map((r) => r.port)]).toEqual([keyOf(w), []]);
    }
    const agentPolicy = by.get('NetworkPolicy/rank-agent')!;
    const [lo, hi] = by.get('ConfigMap/cmesh-agent')!.data.CMESH_DATA_PORTS.split('-').map(Number);
    const data = agentPolicy.spec.ingress.find((r: any) => r.ports.some((p: any) => p.port === lo));
    expect(data.ports).toEqual([{ protocol: 'TCP', port: lo, endPort: hi }]);
    expect(data.from).toEqual([{ podSelector: { matchLabels: agentWorkload(objs).spec.selector.matchLabels } }]);
  });

  it("every image is set by a kustomize images: block; cmesh's own from a registry the user sets, never a Docker Hub cmesh/ organisation", () => {
    const rules = [BASE, ...OVERLAYS].flatMap(
      (d) => ((load(readFileSync(join(d, 'kustomization.yaml'), 'utf8')) as any).images ?? []) as { name: string; newName?: string; newTag: string }[],
    );
    for (const w of objs.filter((o) => isWorkload(o))) {
      for (const c of podSpec(w).containers) {
        const { name, tag } = splitImage(c.image);
        expect([c.name, rules.find((r) => (r.newName ?? r.name) === name)?.newTag]).toEqual([c.name, tag]);
        expect(c.image).not.toMatch(/^(docker\.io\/)?cmesh\//);
        // the manifests name cmesh's images cmesh/<image> (the local build tags); the base maps
        // each to the placeholder registry, which the user replaces
        const rule = rules.find((r) => (r.newName ?? r.name) === name)!;
        if (rule.name.startsWith('cmesh/')) expect(rule.newName).toBe(`registry.example.com/${rule.name}`);
      }
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

  it("agents have stable names (a StatefulSet's pods; the GPU DaemonSet's nodes) behind a headless Service, with a memory /dev/shm", () => {
    const s = agentWorkload(objs);
    const svc = by.get('Service/rank-agent')!;
    expect(svc.spec.clusterIP).toBe('None');
    const agent = container(s, 'agent');
    if (s.kind === 'StatefulSet') {
      expect(s.spec.serviceName).toBe('rank-agent');
      expect(agent.env.find((e: any) => e.name === 'CMESH_AGENT_NAME').valueFrom.fieldRef.fieldPath).toBe('metadata.name');
    } else {
      expect(agent.env.find((e: any) => e.name === 'CMESH_NODE_NAME').valueFrom.fieldRef.fieldPath).toBe('spec.nodeName');
      expect(agent.env.find((e: any) => e.name === 'CMESH_AGENT_NAME').value).toBe('$(CMESH_NODE_NAME)');
    }
    expect(agent.env.find((e: any) => e.name === 'CMESH_AGENT_HOST').valueFrom.fieldRef.fieldPath).toBe('status.podIP');
    const cfg = by.get('ConfigMap/cmesh-agent')!.data;
    const ann = s.spec.template.metadata.annotations;
    expect(ann['prometheus.io/port']).toBe(cfg.CMESH_HTTP_PORT);
    // the GPU pods name a port per device (k8s-gpu.test.ts checks them against the node mode's plan); device 0's here
    const [http, jobMetrics] = s.kind === 'StatefulSet' ? ['http', 'job-metrics'] : ['metrics-0', 'job-metrics-0'];
    expect(agent.ports.find((p: any) => p.name === http).containerPort).toBe(Number(cfg.CMESH_HTTP_PORT));
    expect(agent.ports.find((p: any) => p.name === jobMetrics).containerPort).toBe(Number(cfg.CMESH_METRICS_PORT));
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
    expect(jobs['cmesh-coordinator'].dns_sd_configs[0]).toMatchObject({
      names: ['coordinator-pods.cmesh.svc.cluster.local'],
      type: 'A',
      port: pods.spec.ports[0].port,
    });
    const agentCfg = by.get('ConfigMap/cmesh-agent')!.data;
    expect(jobs['cmesh-agent'].dns_sd_configs[0]).toMatchObject({
      names: ['rank-agent.cmesh.svc.cluster.local'],
      type: 'A',
      port: Number(agentCfg.CMESH_HTTP_PORT),
    });
    expect(jobs['cmesh-job'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent.cmesh.svc.cluster.local'], port: Number(agentCfg.CMESH_METRICS_PORT) });
    // NATS through its exporter sidecar, on the headless Service's metrics port
    const natsMetrics = by.get('Service/nats-headless')!.spec.ports.find((p: any) => p.name === 'metrics');
    expect(jobs['cmesh-nats'].dns_sd_configs[0]).toMatchObject({ names: ['nats-headless.cmesh.svc.cluster.local'], type: 'A', port: natsMetrics.port });
  });

  it("NATS's monitoring port is scraped through a prometheus-nats-exporter sidecar reading it over the pod's loopback", () => {
    const nats = by.get('StatefulSet/nats')!;
    const exporter = container(nats, 'nats-exporter');
    const monitor = container(nats, 'nats').ports.find((p: any) => p.name === 'monitor').containerPort;
    expect(exporter.args.at(-1)).toBe(`http://127.0.0.1:${monitor}`);
    expect(exporter.args).toEqual(expect.arrayContaining(['-varz', '-connz', '-jsz=all', '-healthz']));
    const port = exporter.ports.find((p: any) => p.name === 'metrics').containerPort;
    expect(exporter.args.slice(0, 2)).toEqual(['-port', String(port)]);
    expect(nats.spec.template.metadata.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(port),
      'prometheus.io/path': '/metrics',
    });
    expect(splitImage(exporter.image).name).toBe('natsio/prometheus-nats-exporter');
  });
});

describe('authentication', () => {
  const objs = byKey(base);
  const CLUSTER = objs.get('ConfigMap/cmesh')!.data.CMESH_CLUSTER;
  const names = clusterNames(CLUSTER === 'default' ? undefined : CLUSTER);
  const made = (o: Partial<Parameters<typeof k8sSecrets>[0]> = {}) =>
    byKey(loadAll(k8sSecrets({ agents: 2, tenants: [], namespace: 'cmesh', ...o })) as K8sObject[]);
  const env = (o: string, c: string) => Object.fromEntries(container(objs.get(o)!, c).env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
  const agentPods = (n: number) => Array.from({ length: n }, (_, i) => `${K8S_AGENT_STATEFULSET}-${i}`);
  /** A Secret's values, decoded (`cmesh secrets k8s` writes them base64 in data, as server-side apply wants). */
  const dataOf = (secret: K8sObject) =>
    Object.fromEntries(Object.entries(secret.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])) as Record<
      string,
      string
    >;
  /** The authorization block of an auth.conf, parsed (natsAuthorization writes JSON). */
  const authBlock = (conf: string) => JSON.parse(conf.replace(/^authorization: /, '')) as { users: { user: string; password: string; permissions: any }[] };

  it('NATS reads auth.conf from the Secret cmesh-nats-auth, mounted beside its nats.conf; no password in the manifests or the environment', () => {
    const cm = objs.get('ConfigMap/nats')!;
    expect(cm.data['nats.conf']).toMatch(/^include \.\/auth\.conf$/m);
    expect(Object.keys(cm.data)).toEqual(['nats.conf']);
    const s = objs.get('StatefulSet/nats')!;
    const nats = container(s, 'nats');
    // its environment names it and sizes the Go heap, never a secret
    expect((nats.env ?? []).filter((e: any) => e.valueFrom?.secretKeyRef || /PASSWORD|TOKEN/.test(e.name))).toEqual([]);
    const confDir = dirname(nats.args[nats.args.indexOf('--config') + 1]);
    const mount = nats.volumeMounts.find((m: any) => m.mountPath === confDir);
    expect(mount.readOnly).toBe(true);
    // of the Secret, the files nats.conf includes only (not the route password's own key)
    const files = [
      { key: 'auth.conf', path: 'auth.conf' },
      { key: 'routes.conf', path: 'routes.conf' },
    ];
    expect(volume(s, mount.name).projected.sources).toEqual([{ configMap: { name: 'nats' } }, { secret: { name: K8S_SECRETS.nats, items: files } }]);
    for (const f of files) expect(cm.data['nats.conf']).toMatch(new RegExp(`^ *include \\./${f.path.replace('.', '\\.')}$`, 'm'));
    // the Secrets are made by `cmesh secrets k8s`, never shipped in the manifests
    expect(base.some((o) => o.kind === 'Secret')).toBe(false);
    expect(JSON.stringify(base)).not.toMatch(/PASSWORD"?,"value"/);
  });

  it('cmesh secrets k8s: cmesh-auth (API token, coordinator, tenants), cmesh-agent-auth (one key per agent pod), cmesh-nats-auth (auth.conf of those passwords), valid Secrets', () => {
    const secrets = made({ agents: 3, tenants: ['team-b', 'team-c'] });
    expect([...secrets.keys()]).toEqual(Object.values(K8S_SECRETS).map((n) => `Secret/${n}`));
    const auth = dataOf(secrets.get(`Secret/${K8S_SECRETS.auth}`)!);
    const agents = dataOf(secrets.get(`Secret/${K8S_SECRETS.agents}`)!);
    expect(Object.keys(auth)).toEqual([K8S_API_TOKEN_KEY, ...['coordinator', 'client', 'team-b', 'team-c'].map(natsPasswordKey)]);
    // the agents' Secret holds the per-pod keys and nothing else
    expect(Object.keys(agents)).toEqual(agentPods(3).map(natsPasswordKey));
    const values = [...Object.values(auth), ...Object.values(agents)] as string[];
    for (const v of values) expect(v.length).toBeGreaterThanOrEqual(32);
    expect(new Set(values).size).toBe(values.length); // every login its own password
    const conf = dataOf(secrets.get(`Secret/${K8S_SECRETS.nats}`)!)['auth.conf'];
    const password = (user: string) => (agents[natsPasswordKey(user)] ?? auth[natsPasswordKey(user)]) as string;
    expect(conf).toBe(natsAuthorization(deploymentNatsUsers(agentPods(3), ['team-b', 'team-c'], password), names));
    const users = authBlock(conf).users;
    expect(users.map((u) => [u.user, u.password])).toEqual(['coordinator', ...agentPods(3), 'client', 'team-b', 'team-c'].map((u) => [u, password(u)]));
    // each agent its own login: no shared agent user
    expect(users.some((u) => u.user === 'agent')).toBe(false);
    for (const s of secrets.values()) expect(s.metadata).toMatchObject({ namespace: 'cmesh', labels: { 'app.kubernetes.io/part-of': 'cmesh' } });
    for (const r of validate([...secrets.values()])) expect(r).toEqual({ key: r.key, error: null });
    expect(strictFieldErrors([...secrets.values()])).toEqual([]);
    // fresh values on every run
    expect(dataOf(made().get(`Secret/${K8S_SECRETS.auth}`)!)[K8S_API_TOKEN_KEY]).not.toBe(dataOf(made().get(`Secret/${K8S_SECRETS.auth}`)!)[K8S_API_TOKEN_KEY]);
  }, 60_000);

  it("the rendered auth.conf lets agent rank-agent-1 publish only on its own agents' and job-event subjects", () => {
    const users = authBlock(dataOf(made({ agents: 3 }).get(`Secret/${K8S_SECRETS.nats}`)!)['auth.conf']).users;
    const p = users.find((u) => u.user === 'rank-agent-1')!.permissions;
    const own = [
      names.agents.register('rank-agent-1'),
      names.agents.heartbeat('rank-agent-1'),
      names.agents.deregister('rank-agent-1'),
      names.jobs.events('*', 'rank-agent-1'),
    ];
    for (const subject of own) expect(p.publish.allow).toContain(subject);
    // no pattern it may publish on covers another agent's subjects (a real agent's or a made-up one's)
    for (const other of ['rank-agent-0', 'rank-agent-2', 'rank-agent-9']) {
      const theirs = [names.agents.register(other), names.agents.heartbeat(other), names.agents.deregister(other), names.jobs.events('job-1', other)];
      for (const subject of theirs) expect([subject, p.publish.allow.filter((a: string) => subjectCovers(a, subject))]).toEqual([subject, []]);
    }
    expect(p.publish.allow.some((a: string) => subjectCovers(a, names.jobs.events('job-1', 'rank-agent-1')))).toBe(true);
    expect(p.publish.allow.some((a: string) => subjectCovers(a, names.jobs.start('rank-agent-1')))).toBe(false);
    expect(p.subscribe.allow).toContain(names.agents.events('rank-agent-1'));
    expect(p.subscribe.allow).not.toContain(names.agents.events('rank-agent-0'));
    expect(p.subscribe.allow).toContain(names.jobs.start('rank-agent-1'));
    expect(p.subscribe.allow).not.toContain(names.jobs.start('rank-agent-0'));
  });

  it('--keep: values already applied are kept (kubectl get secret -o json), only new logins get fresh ones', () => {
    const first = made({ agents: 2 });
    // as kubectl prints them: a List of Secrets, data base64
    const list = {
      kind: 'List',
      items: [...first.values()].map((s) => ({ kind: 'Secret', metadata: s.metadata, data: s.data })),
    };
    const keep = secretValues(JSON.stringify(list), 'test');
    const second = made({ agents: 3, tenants: ['team-b'], keep });
    const [a1, a2] = [first, second].map((m) => dataOf(m.get(`Secret/${K8S_SECRETS.auth}`)!));
    const [g1, g2] = [first, second].map((m) => dataOf(m.get(`Secret/${K8S_SECRETS.agents}`)!));
    expect(a2).toMatchObject(a1);
    expect(g2).toMatchObject(g1);
    expect(Object.keys(g2)).toEqual(agentPods(3).map(natsPasswordKey));
    expect(a2[natsPasswordKey('team-b')]).toHaveLength(43);
    expect(g2[natsPasswordKey('rank-agent-2')]).not.toBe(g2[natsPasswordKey('rank-agent-1')]);
    expect(() => secretValues('{"kind":"ConfigMap"}', 'x.json')).toThrow(/--keep x\.json: holds a "ConfigMap", not a Secret/);
    expect(() => made({ keep: new Map([[K8S_API_TOKEN_KEY, 'short']]) })).toThrow(/--keep: api-token holds 5 characters/);
  });

  it('refuses what would make a broken or ambiguous login, naming it', () => {
    expect(() => made({ tenants: ['rank-agent-1'] })).toThrow(/--tenant "rank-agent-1": the name of one of the deployment's own logins/);
    expect(() => made({ tenants: ['coordinator'] })).toThrow(/--tenant "coordinator"/);
    expect(() => made({ tenants: ['team b'] })).toThrow(/--tenant "team b": letters, digits, _ and - only/);
    expect(() => made({ namespace: 'Bad_NS' })).toThrow(/--namespace "Bad_NS"/);
  });

  it('each agent logs in as its pod (its agent id) with its own key of cmesh-agent-auth, mounted read-only; an agent pod sees no other Secret', () => {
    const s = objs.get('StatefulSet/rank-agent')!;
    const e = env('StatefulSet/rank-agent', 'agent');
    expect(e.CMESH_AGENT_NAME).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
    expect(e.NATS_USER).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
    expect(e.CMESH_AGENT_ID).toBeUndefined();
    expect(e.NATS_PASSWORD).toBeUndefined();
    const agent = container(s, 'agent');
    const file = e.NATS_PASSWORD_FILE as string;
    const mount = agent.volumeMounts.find((m: any) => file.startsWith(m.mountPath + '/'));
    expect(mount.readOnly).toBe(true);
    expect(volume(s, mount.name).secret.secretName).toBe(K8S_SECRETS.agents);
    // $(CMESH_AGENT_NAME) is expanded by the kubelet from the variable set before it
    const names = agent.env.map((x: any) => x.name);
    expect(names.indexOf('CMESH_AGENT_NAME')).toBeLessThan(names.indexOf('NATS_PASSWORD_FILE'));
    expect(file).toBe(`${mount.mountPath}/${natsPasswordKey('$(CMESH_AGENT_NAME)')}`);
    // every pod of the StatefulSet finds its key in what `cmesh secrets k8s` makes by default
    const keys = Object.keys(dataOf(made().get(`Secret/${K8S_SECRETS.agents}`)!));
    const pods = agentPods(s.spec.replicas);
    expect(pods.every((pod) => pod.startsWith(`${s.metadata.name}-`))).toBe(true);
    expect(pods.map((pod) => file.replace('$(CMESH_AGENT_NAME)', pod).slice(mount.mountPath.length + 1))).toEqual(keys);
    // no API token, coordinator or tenant password reaches an agent pod
    expect(JSON.stringify(podSpec(s))).not.toContain(K8S_SECRETS.auth + '"');
  });

  it('the coordinator logs in as coordinator with its key of cmesh-auth and gets the API token; every key the manifests name exists', () => {
    expect(env('Deployment/coordinator', 'coordinator')).toMatchObject({
      NATS_USER: 'coordinator',
      NATS_PASSWORD: { secretKeyRef: { name: K8S_SECRETS.auth, key: natsPasswordKey('coordinator') } },
      CMESH_API_TOKEN: { secretKeyRef: { name: K8S_SECRETS.auth, key: K8S_API_TOKEN_KEY } },
    });
    const secrets = made();
    const refs = base
      .flatMap((o) => JSON.stringify(o).match(/"secretKeyRef":\{"name":"[a-z-]+","key":"[a-z-]+"\}/g) ?? [])
      .map((r) => JSON.parse(`{${r}}`).secretKeyRef);
    expect(refs.length).toBe(2);
    for (const r of refs) expect([r, Object.keys(dataOf(secrets.get(`Secret/${r.name}`)!))]).toEqual([r, expect.arrayContaining([r.key])]);
  });

  it('live: a nats-server with the ConfigMap and the Secret as the pod mounts them admits each agent with its own password only, and only on its own subjects', async () => {
    const secrets = made({ agents: 2, tenants: ['team-b'] });
    const auth = dataOf(secrets.get(`Secret/${K8S_SECRETS.auth}`)!);
    const agents = dataOf(secrets.get(`Secret/${K8S_SECRETS.agents}`)!);
    // the projected volume: nats.conf and auth.conf in one directory; ports and store on this machine
    const dir = mkdtempSync(join(tmpdir(), 'cmesh-k8s-nats-'));
    const [port, monitor] = [await freePort(), await freePort()];
    const natsConf = objs.get('ConfigMap/nats')!.data['nats.conf'] as string;
    const { 'auth.conf': authConf, 'routes.conf': routesConf } = dataOf(secrets.get(`Secret/${K8S_SECRETS.nats}`)!);
    const conf = writeLocalNatsPod({ natsConf, secretFiles: { 'auth.conf': authConf, 'routes.conf': routesConf }, dir, clusterPort: await freePort() });
    // one server of the cluster alone (its routes lead nowhere here): its clients' logins are what is checked
    const proc = spawn('nats-server', ['--config', conf, '-a', '127.0.0.1', '-p', String(port), '-m', String(monitor)], {
      stdio: 'ignore',
      env: { ...process.env, SERVER_NAME: 'nats-0' },
    });
    const conns: { close(): Promise<void> }[] = [];
    try {
      expect(await waitForPort(port, 10_000, '127.0.0.1', () => proc.exitCode === null)).toBe(true);
      const servers = `nats://127.0.0.1:${port}`;
      const login = async (user: string, pass: string) => {
        const nc: NatsConnection = await connect({ servers, user, pass, inboxPrefix: `_INBOX.${user}`, reconnect: false });
        conns.push(nc);
        return nc;
      };
      await expect(connect({ servers, reconnect: false })).rejects.toThrow(AuthorizationError);
      // another agent's password is no good
      await expect(connect({ servers, user: 'rank-agent-1', pass: agents[natsPasswordKey('rank-agent-0')], reconnect: false })).rejects.toThrow(
        AuthorizationError,
      );
      const coordinator = await login('coordinator', auth[natsPasswordKey('coordinator')]);
      const agent1 = await login('rank-agent-1', agents[natsPasswordKey('rank-agent-1')]);
      await login('team-b', auth[natsPasswordKey('team-b')]);
      const seen: string[] = [];
      const sub = coordinator.subscribe(names.agents.registerWildcard, {
        callback: (_e, m) => {
          seen.push(m.subject);
        },
      });
      await coordinator.flush();
      // in order on one connection: had the forged one been let through, it would arrive first
      agent1.publish(names.agents.register('rank-agent-0'));
      agent1.publish(names.agents.register('rank-agent-1'));
      await agent1.flush().catch(() => undefined);
      for (const end = Date.now() + 5000; seen.length === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toEqual([names.agents.register('rank-agent-1')]);
      sub.unsubscribe();
    } finally {
      for (const nc of conns) await nc.close().catch(() => undefined);
      if (proc.exitCode === null && proc.pid) process.kill(proc.pid, 'SIGTERM');
      await new Promise((r) => (proc.exitCode === null ? proc.once('exit', r) : r(undefined)));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

// the GPU and RDMA overlays' own checks (the DaemonSet, the devices, NCCL's ports): k8s-gpu.test.ts

describe('monitoring overlay (Prometheus Operator)', () => {
  const MONITORING = join(ROOT, 'k8s/overlays/monitoring');
  const objs = renderKustomization(MONITORING);
  const by = byKey(objs);
  const operator = objs.filter((o) => o.apiVersion.startsWith('monitoring.coreos.com/'));
  const jobOf = (e: { relabelings: { targetLabel?: string; replacement?: string }[] }) => e.relabelings.find((r) => r.targetLabel === 'job')?.replacement;
  const k8sJobs = Object.fromEntries(
    (load(readFileSync(join(ROOT, 'dashboards/prometheus/prometheus-k8s.yml'), 'utf8')) as any).scrape_configs.map((j: any) => [
      j.job_name,
      j.dns_sd_configs[0],
    ]),
  );

  it("is the base plus PodMonitors, a ServiceMonitor and a PrometheusRule in the namespace, valid against the operator's schemas, strictly", () => {
    expect(OVERLAYS).toContain(MONITORING);
    expect(objs.filter((o) => !operator.includes(o)).map(keyOf)).toEqual(base.map(keyOf));
    expect(operator.map(keyOf)).toEqual([
      'PodMonitor/cmesh-coordinator',
      'PodMonitor/cmesh-agent',
      'PodMonitor/cmesh-agent-gpu',
      'ServiceMonitor/cmesh-nats',
      'PrometheusRule/cmesh',
    ]);
    for (const o of operator)
      expect([keyOf(o), o.metadata.namespace, (o.metadata.labels as any)['app.kubernetes.io/part-of']]).toEqual([keyOf(o), 'cmesh', 'cmesh']);
    for (const r of validate(operator)) expect(r).toEqual({ key: r.key, error: null });
    // the checks bite on these kinds too: a misspelt field, a wrong type
    const typo = structuredClone(by.get('PodMonitor/cmesh-agent')!);
    typo.spec.podMetricsEndpoints[0].prot = 'http';
    const errors = strictFieldErrors([...operator, typo]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/'"prot"' does not exist/);
    const bad = structuredClone(by.get('ServiceMonitor/cmesh-nats')!);
    bad.spec.endpoints = 'metrics';
    expect(validate([bad])[0].error).toMatch(/endpoints must be array/);
  }, 60_000);

  it('the monitors select the pods and ports that exist and name the jobs the rules use, as prometheus-k8s.yml does', () => {
    const pods = (sel: Record<string, string>) =>
      objs.filter((o) => isWorkload(o) && Object.entries(sel).every(([k, v]) => o.spec.template.metadata.labels[k] === v));
    const portOf = (w: K8sObject, name: string) =>
      podSpec(w)
        .containers.flatMap((c: any) => c.ports ?? [])
        .find((p: any) => p.name === name)?.containerPort;
    const seen: Record<string, number> = {};
    // cmesh-agent-gpu scrapes the GPU overlay's per-device ports, which the base's pods lack: k8s-gpu.test.ts
    for (const m of operator.filter((o) => o.kind === 'PodMonitor' && o.metadata.name !== 'cmesh-agent-gpu')) {
      const [w] = pods(m.spec.selector.matchLabels);
      expect([keyOf(m), pods(m.spec.selector.matchLabels).length]).toEqual([keyOf(m), 1]);
      for (const e of m.spec.podMetricsEndpoints) {
        expect([keyOf(m), e.port, portOf(w, e.port) !== undefined, e.path]).toEqual([keyOf(m), e.port, true, '/metrics']);
        seen[jobOf(e)!] = portOf(w, e.port);
      }
    }
    const sm = by.get('ServiceMonitor/cmesh-nats')!;
    const services = objs.filter(
      (o) =>
        o.kind === 'Service' &&
        Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => (o.metadata.labels as Record<string, string> | undefined)?.[k] === v),
    );
    // only the headless Service has the port: one target per NATS pod
    const withPort = services.filter((s) => s.spec.ports.some((p: any) => p.name === sm.spec.endpoints[0].port));
    expect(withPort.map(keyOf)).toEqual(['Service/nats-headless']);
    seen[jobOf(sm.spec.endpoints[0])!] = withPort[0].spec.ports.find((p: any) => p.name === sm.spec.endpoints[0].port).port;
    // the same jobs on the same ports as the plain Prometheus configuration
    expect(Object.keys(seen).sort()).toEqual(['cmesh-agent', 'cmesh-coordinator', 'cmesh-job', 'cmesh-nats']);
    for (const [job, port] of Object.entries(seen)) expect([job, port]).toEqual([job, k8sJobs[job].port]);
  });

  it('the PrometheusRule is the rule file, generated; promtool accepts what the operator loads', () => {
    expect(readFileSync(PROMETHEUS_RULE_PATH, 'utf8')).toBe(prometheusRuleYaml());
    const rule = by.get('PrometheusRule/cmesh')!;
    expect(rule.spec.groups).toEqual((load(readFileSync(join(ROOT, 'dashboards/prometheus/rules/cmesh.rules.yml'), 'utf8')) as any).groups);
    const tmp = mkdtempSync(join(tmpdir(), 'cmesh-prometheusrule-'));
    try {
      writeFileSync(join(tmp, 'rules.yml'), JSON.stringify({ groups: rule.spec.groups }));
      expect(execFileSync('promtool', ['check', 'rules', join(tmp, 'rules.yml')], { encoding: 'utf8' })).toMatch(/SUCCESS: 15 rules found/);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('the quickstart, in the order the documents give it, on an empty cluster', () => {
  const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');
  /** The commands of the first sh block of a document that applies a kustomization (continuations joined, comments dropped). */
  const quickstart = (doc: string): string[] => {
    const blocks = [...readFileSync(join(ROOT, doc), 'utf8').matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
    const block = blocks.find((b) => /^kubectl apply -k /m.test(b));
    if (!block) throw new Error(`${doc}: no sh block with kubectl apply -k`);
    return block
      .replace(/\\\n\s*/g, ' ')
      .split('\n')
      .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
      .filter((l) => /\bkubectl (apply|create)\b/.test(l));
  };
  /** What a command sends to the API server, in order: files, cmesh's output, kustomizations. */
  const objectsOf = (cmd: string): K8sObject[] => {
    const secrets = /(?:npx )?cmesh secrets k8s([^|]*)\|\s*(.+)$/.exec(cmd);
    if (secrets) {
      const r = spawnSync(process.execPath, [CMESH, 'secrets', 'k8s', ...secrets[1].trim().split(/\s+/).filter(Boolean)], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect([cmd, r.status, r.stderr]).toEqual([cmd, 0, '']);
      return loadAll(r.stdout) as K8sObject[];
    }
    const k = /^kubectl apply -k (\S+)$/.exec(cmd);
    if (k) return renderKustomization(join(ROOT, k[1]));
    const f = /^kubectl (?:apply|create) -f (\S+)$/.exec(cmd);
    if (f) return loadAll(readFileSync(join(ROOT, f[1]), 'utf8')).filter(Boolean) as K8sObject[];
    throw new Error(`a command this test does not model: ${cmd}`);
  };
  /** kubectl's refusals on a cluster with no namespace yet: a namespaced object before its Namespace. */
  const applyInOrder = (cmds: string[]): string[] => {
    const namespaces = new Set<string>();
    const refused: string[] = [];
    for (const cmd of cmds) {
      for (const o of objectsOf(cmd)) {
        if (o.kind === 'Namespace') namespaces.add(o.metadata.name);
        else if (!namespaces.has(o.metadata.namespace ?? 'default')) refused.push(`${keyOf(o)}: namespaces "${o.metadata.namespace ?? 'default'}" not found`);
      }
    }
    return refused;
  };

  it.each(['README.md', 'k8s/README.md'])(
    '%s: the namespace, then the Secrets into it, then the manifests',
    (doc) => {
      const cmds = quickstart(doc);
      expect(cmds[0]).toBe('kubectl apply -f k8s/base/namespace.yaml');
      expect(cmds[1]).toMatch(/cmesh secrets k8s .*\| kubectl apply --server-side -f -$/);
      expect(cmds[2]).toMatch(/^kubectl apply -k k8s\/(base|overlays\/\w+)$/);
      expect(applyInOrder(cmds)).toEqual([]);
      // the check bites: the Secrets first fail as kubectl would
      expect(applyInOrder([cmds[1], ...cmds.filter((c) => c !== cmds[1])])).toEqual(
        Object.values(K8S_SECRETS).map((n) => `Secret/${n}: namespaces "cmesh" not found`),
      );
    },
    120_000,
  );

  it('every document pipes cmesh secrets k8s into a server-side apply (no plain-text last-applied-configuration), as its output says', () => {
    const docs = [
      'README.md',
      'k8s/README.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const pipes = docs.flatMap((d) =>
      [
        ...readFileSync(join(ROOT, d), 'utf8')
          .replace(/\\\n\s*/g, ' ')
          .matchAll(/cmesh secrets k8s[^|`\n]*\\?\|\s*(kubectl [^`\n#]*?)\s*(?:`|#|\n|$)/g),
      ].map((m) => [d, m[1].trim()]),
    );
    expect(pipes.length).toBeGreaterThanOrEqual(5);
    for (const [d, kubectl] of pipes) expect([d, kubectl]).toEqual([d, expect.stringMatching(/^kubectl (apply --server-side -f -|create -f -)$/)]);
    expect(K8S_SECRETS_APPLY).toBe('kubectl apply --server-side -f -');
    // the output: its first line says how; the values in data (base64), none in stringData
    const out = k8sSecrets({ agents: 2, tenants: [], namespace: 'cmesh' });
    expect(out.split('\n')[0]).toContain(K8S_SECRETS_APPLY);
    const secrets = loadAll(out) as K8sObject[];
    expect(secrets.map((s) => [s.kind, s.stringData, typeof s.data])).toEqual(secrets.map(() => ['Secret', undefined, 'object']));
  });
});

describe.each(readdirSync(join(ROOT, 'k8s/examples')).map((d) => [`k8s/examples/${d}`, join(ROOT, 'k8s/examples', d)]))('%s', (_name, dir) => {
  it('renders as kubectl kustomize does, valid against the API schemas, strictly; in the namespace, its images from the registry the user sets', () => {
    const mine = renderKustomization(dir);
    if (hasKubectl) {
      const theirs = loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as K8sObject[];
      expect(theirs).toEqual(mine);
    }
    for (const r of validate(mine)) expect(r).toEqual({ key: r.key, error: null });
    expect(strictFieldErrors(mine)).toEqual([]);
    for (const o of mine) expect([keyOf(o), o.metadata.namespace]).toEqual([keyOf(o), 'cmesh']);
    const spec = (o: K8sObject) => o.spec?.template?.spec ?? o.spec?.jobTemplate?.spec?.template?.spec;
    const images = mine.flatMap((o) => [...(spec(o)?.initContainers ?? []), ...(spec(o)?.containers ?? [])].map((c: any) => c.image as string));
    expect(images.length).toBeGreaterThan(0);
    for (const i of images) expect(i).toMatch(/^registry\.example\.com\//);
  }, 60_000);
});
