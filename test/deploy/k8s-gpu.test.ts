// The GPU deployment (k8s/overlays/gpu, k8s/overlays/rdma, k8s/components/host-network), checked
// without a cluster: the node-level DaemonSet on labelled nodes owning all the node's GPUs; the
// environment each pod's agents get, as the kubelet resolves it on two nodes (ConfigMaps,
// $(VAR), the downward API) and as the agent's own node mode plans it, giving every device of
// every node its own agent, device, socket, ports and NATS login (found in what `cmesh secrets
// k8s --gpu-nodes` makes); the sidecar container's real launcher (cmesh-node-sidecars with the
// sidecar binary of this checkout) serving exactly the sockets the agents will use; NCCL's ports
// in the NetworkPolicy; the RDMA and host-network options; libnccl2 pinned to the CUDA base.
import { ChildProcess, execFileSync, spawn, spawnSync } from 'child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join, relative, resolve } from 'path';
import { load, loadAll } from 'js-yaml';
import { nodeAgentName, nodeAgentNames } from '@cmesh/protocol';
import { freePort } from '@cmesh/testing';
import { K8sObject, byKey, keyOf, renderKustomization } from './support/kustomize';
import { strictFieldErrors } from './support/strict-fields';
import { K8S_GPUS_PER_NODE, K8S_SECRETS, k8sSecrets, natsPasswordKey } from '@cmesh/cli/commands';
import { loadConfig, nodePlan } from '@cmesh/rank-agent/config';

const ROOT = resolve(__dirname, '../..');
const gpu = renderKustomization(join(ROOT, 'k8s/overlays/gpu'));
const rdma = renderKustomization(join(ROOT, 'k8s/overlays/rdma'));
const base = renderKustomization(join(ROOT, 'k8s/base'));
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
const SIDECAR = join(ROOT, 'native/nccl-sidecar/build/cmesh-nccl-sidecar');
const LAUNCHER = join(ROOT, 'native/nccl-sidecar/node-sidecars.sh');
const validate = (objs: K8sObject[]) =>
  JSON.parse(execFileSync(process.execPath, [join(__dirname, 'support/validate-k8s.mjs')], { cwd: ROOT, input: JSON.stringify(objs), encoding: 'utf8' })) as {
    key: string;
    error: string | null;
  }[];

const daemonSet = (objs: K8sObject[]) => byKey(objs).get('DaemonSet/rank-agent-gpu')!;
const podSpec = (o: K8sObject) => o.spec.template.spec;
const container = (o: K8sObject, name: string) => podSpec(o).containers.find((c: { name: string }) => c.name === name);
const volume = (o: K8sObject, name: string) => podSpec(o).volumes.find((v: { name: string }) => v.name === name);
const limitsOf = (c: any) => ({ ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) });
const gib = (q: string) => Number(/^(\d+)Gi$/.exec(q)![1]);

/** A container's environment as the kubelet makes it in a pod on `node`: envFrom, then env in order, $(VAR) expanded, the downward API's fields. */
function kubeletEnv(objs: K8sObject[], c: any, pod: { nodeName: string; podIP: string; name: string }): Record<string, string> {
  const by = byKey(objs);
  const env: Record<string, string> = {};
  for (const f of c.envFrom ?? []) Object.assign(env, by.get(`ConfigMap/${f.configMapRef.name}`)!.data);
  const fields: Record<string, string> = { 'spec.nodeName': pod.nodeName, 'status.podIP': pod.podIP, 'metadata.name': pod.name };
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => env[v] ?? m);
    else if (e.valueFrom?.fieldRef) env[e.name] = fields[e.valueFrom.fieldRef.fieldPath];
  }
  return env;
}

/** What must agree between the agents and the GPUs of a pod; each line a disagreement. */
function deviceCountErrors(objs: K8sObject[]): string[] {
  const ds = daemonSet(objs);
  const devices = byKey(objs).get('ConfigMap/cmesh-agent')!.data.CMESH_DEVICES;
  const errors: string[] = [];
  const gpus = limitsOf(container(ds, 'nccl-sidecar'))['nvidia.com/gpu'];
  if (String(gpus) !== devices) errors.push(`the sidecar container requests ${gpus} GPUs, CMESH_DEVICES is ${devices}`);
  if (limitsOf(container(ds, 'agent'))['nvidia.com/gpu'] !== undefined) errors.push('the agent container requests GPUs');
  return errors;
}

const NODES = ['gpu-a.example.internal', 'gpu-b'];

describe('GPU overlay: one agent pod per GPU node', () => {
  const ds = daemonSet(gpu);
  const by = byKey(gpu);
  const cfg = by.get('ConfigMap/cmesh-agent')!.data;

  it('is a DaemonSet on the labelled GPU nodes whose sidecar container holds all the node GPUs, as many as the agents it runs', () => {
    expect(by.has('StatefulSet/rank-agent')).toBe(false);
    // no disruption budget selects its pods: a budget's maxUnavailable needs a controller with a
    // scale subresource, which a DaemonSet lacks; drains leave DaemonSet pods alone
    const selects = (sel: Record<string, string>) => Object.entries(sel).every(([k, v]) => ds.spec.template.metadata.labels[k] === v);
    expect(gpu.filter((o) => o.kind === 'PodDisruptionBudget' && selects(o.spec.selector.matchLabels)).map(keyOf)).toEqual([]);
    expect(byKey(base).has('PodDisruptionBudget/rank-agent')).toBe(true);
    expect(podSpec(ds).nodeSelector).toEqual({ 'cmesh.io/gpu-node': 'true' });
    expect(podSpec(ds).tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
    expect(ds.spec.updateStrategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } });
    expect(podSpec(ds).containers.map((c: any) => c.name)).toEqual(['agent', 'nccl-sidecar']);
    expect(cfg.CMESH_DEVICES).toBe(String(K8S_GPUS_PER_NODE));
    // ready when every agent of the pod answers: the node mode's check, where the agent image has it
    // (WORKDIR /app, apps/rank-agent/dist built from src)
    const [node, script] = container(ds, 'agent').readinessProbe.exec.command;
    expect(node).toBe('node');
    expect(existsSync(join(ROOT, script.replace('/dist/', '/src/').replace(/\.js$/, '.ts')))).toBe(true);
    const agentImage = readFileSync(join(ROOT, 'apps/rank-agent/Dockerfile'), 'utf8');
    expect(agentImage).toMatch(/^WORKDIR \/app$/m);
    expect(agentImage).toContain('COPY --from=build /app/apps/rank-agent/dist apps/rank-agent/dist');
    expect(cfg.CMESH_NCCL).toBe('1');
    expect(deviceCountErrors(gpu)).toEqual([]);
    expect(deviceCountErrors(rdma)).toEqual([]);
    // the check bites: a GPU count patched in one place only
    const patched = structuredClone(gpu);
    byKey(patched).get('ConfigMap/cmesh-agent')!.data.CMESH_DEVICES = '4';
    expect(deviceCountErrors(patched)).toEqual(['the sidecar container requests 8 GPUs, CMESH_DEVICES is 4']);
    // the base stays CPU-only
    expect(byKey(base).get('ConfigMap/cmesh-agent')!.data.CMESH_NCCL).toBe('0');
    expect(podSpec(byKey(base).get('StatefulSet/rank-agent')!).containers).toHaveLength(1);
  });

  it('the node ranks share one host: the pod network, IPC namespace and a memory /dev/shm sized for NCCL; nothing of the host', () => {
    const spec = podSpec(ds);
    for (const k of ['hostNetwork', 'hostIPC', 'hostPID']) expect([k, spec[k]]).toEqual([k, undefined]);
    expect(volume(ds, 'dshm').emptyDir.medium).toBe('Memory');
    expect(gib(volume(ds, 'dshm').emptyDir.sizeLimit)).toBeGreaterThanOrEqual(8);
    for (const name of ['agent', 'nccl-sidecar']) {
      const c = container(ds, name);
      expect(c.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
      expect(c.volumeMounts).toContainEqual({ name: 'nccl-socket', mountPath: '/var/run/cmesh' });
      expect([name, c.securityContext]).toEqual([name, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } }]);
    }
    // the memory-backed /dev/shm is charged to the container that writes it (NCCL's, in the sidecars)
    expect(gib(limitsOf(container(ds, 'nccl-sidecar')).memory)).toBeGreaterThan(gib(volume(ds, 'dshm').emptyDir.sizeLimit));
    expect(CMESH_SOCKET_DIR(cfg.CMESH_NCCL_SOCKET)).toBe('/var/run/cmesh');
  });

  it("NCCL's ports: its listeners kept in a port range by the pod's sysctl, admitted from the other agent pods; every device's agent ports admitted", () => {
    const sysctl = podSpec(ds).securityContext.sysctls.find((s: any) => s.name === 'net.ipv4.ip_local_port_range');
    const [lo, hi] = sysctl.value.split(/\s+/).map(Number);
    const policy = by.get('NetworkPolicy/rank-agent')!;
    const rule = policy.spec.ingress.find((r: any) => r.ports.some((p: any) => p.port === lo));
    expect(rule.ports).toEqual([{ protocol: 'TCP', port: lo, endPort: hi }]);
    expect(rule.from).toEqual([{ podSelector: { matchLabels: ds.spec.selector.matchLabels } }]);
    expect(hi - lo + 1).toBeGreaterThanOrEqual(1000);
    // clear of the agents' own ports and of the data plane
    const [dlo, dhi] = cfg.CMESH_DATA_PORTS.split('-').map(Number);
    expect(dhi < lo || dlo > hi).toBe(true);
    expect(9563 < lo).toBe(true);
    // agent i of the pod serves HTTP on 9400 + i and its job's metrics on 9500 + i: every one admitted
    const admitted = (port: number) =>
      policy.spec.ingress.some(
        (r: any) =>
          r.from === undefined &&
          r.ports.some((p: any) =>
            typeof p.port === 'number'
              ? p.port <= port && port <= (p.endPort ?? p.port)
              : container(ds, 'agent').ports.find((x: any) => x.name === p.port)?.containerPort === port,
          ),
      );
    for (let i = 0; i < Number(cfg.CMESH_DEVICES); i++) {
      expect([i, admitted(Number(cfg.CMESH_HTTP_PORT) + i), admitted(Number(cfg.CMESH_METRICS_PORT) + i)]).toEqual([i, true, true]);
    }
    // the check bites: NCCL's range is not open to anyone, nor an agent port past the ranges
    expect(admitted(lo)).toBe(false);
    expect(admitted(9400 + 64)).toBe(false);
    expect(container(ds, 'nccl-sidecar').env).toContainEqual({ name: 'NCCL_SOCKET_IFNAME', value: 'eth0' });
  });

  it('pods on two nodes: every device of every node gets its own agent, device, socket, ports and NATS login, from the agent’s own node mode', () => {
    const secrets = byKey(
      loadAll(k8sSecrets({ agents: 0, gpuNodes: NODES, gpusPerNode: Number(cfg.CMESH_DEVICES), tenants: [], namespace: 'cmesh' })) as K8sObject[],
    );
    const keys = Object.keys(secrets.get(`Secret/${K8S_SECRETS.agents}`)!.data as Record<string, string>);
    const mount = container(ds, 'agent').volumeMounts.find((m: any) => m.name === 'nats-auth');
    expect(volume(ds, 'nats-auth').secret.secretName).toBe(K8S_SECRETS.agents);
    const seen: { node: string; name: string; device: number; socket: string; http: number }[] = [];
    for (const [i, nodeName] of NODES.entries()) {
      const env = kubeletEnv(gpu, container(ds, 'agent'), { nodeName, podIP: `10.1.${i}.5`, name: `rank-agent-gpu-${i}` });
      expect(env.CMESH_NODE_NAME).toBe(nodeName);
      const plan = nodePlan(env.CMESH_DEVICES, container(ds, 'agent').args ?? [], env);
      for (const a of plan.agents) {
        const c = loadConfig([], { ...env, ...a.env });
        expect(c.deviceIndex).toBe(a.device);
        expect(c.ncclSocket).toBe(cfg.CMESH_NCCL_SOCKET.replace('{device}', String(a.device)));
        // its login: its own key of the Secret, in the mounted directory
        expect(a.env.NATS_USER).toBe(a.name);
        expect(a.env.NATS_PASSWORD_FILE).toBe(`${mount.mountPath}/${natsPasswordKey(a.name)}`);
        expect(keys).toContain(natsPasswordKey(a.name));
        seen.push({ node: nodeName, name: c.name, device: c.deviceIndex, socket: c.ncclSocket!, http: c.httpPort });
      }
    }
    const n = Number(cfg.CMESH_DEVICES);
    expect(seen).toHaveLength(NODES.length * n);
    expect(new Set(seen.map((s) => s.name)).size).toBe(seen.length);
    expect(seen.map((s) => s.name)).toEqual(nodeAgentNames(NODES, n));
    for (const node of NODES) {
      const mine = seen.filter((s) => s.node === node);
      expect(mine.map((s) => s.device)).toEqual([...Array(n).keys()]);
      expect(new Set(mine.map((s) => s.socket)).size).toBe(n);
      expect(new Set(mine.map((s) => s.http)).size).toBe(n);
    }
    // exactly the logins the Secret holds: no agent without one, no login without an agent
    expect(keys.sort()).toEqual(seen.map((s) => natsPasswordKey(s.name)).sort());
  });

  const launcherIt = existsSync(SIDECAR) ? it : it.skip;
  if (!existsSync(SIDECAR)) console.warn(`${SIDECAR} not built (cmake, native/nccl-sidecar/README.md): the sidecar launcher test is skipped`);
  launcherIt(
    "the sidecar container's launcher serves one socket per device, exactly the agents', reachable by their group; one dying ends the container",
    async () => {
      const sc = container(ds, 'nccl-sidecar');
      const dir = mkdtempSync(join(tmpdir(), 'cmesh-node-sidecars-'));
      const procs: ChildProcess[] = [];
      try {
        // the container's environment, the socket directory moved to a temporary one
        const env = kubeletEnv(gpu, sc, { nodeName: NODES[0], podIP: '10.1.0.5', name: 'rank-agent-gpu-0' });
        const template = env.CMESH_NCCL_SOCKET.replace('/var/run/cmesh', dir);
        const run = { ...process.env, ...env, CMESH_NCCL_SOCKET: template, CMESH_NCCL_SIDECAR: SIDECAR };
        expect(sc.command).toEqual(['/usr/local/bin/cmesh-node-sidecars']);
        const check = () => spawnSync(LAUNCHER, sc.readinessProbe.exec.command.slice(1), { env: run }).status;
        expect(sc.readinessProbe.exec.command.slice(1)).toEqual(['--check']);
        expect(check()).toBe(1);
        const start = () => {
          const p = spawn(LAUNCHER, sc.args ?? [], { env: run, stdio: ['ignore', 'ignore', 'pipe'] });
          procs.push(p);
          const err: string[] = [];
          p.stderr!.on('data', (d: Buffer) => err.push(d.toString()));
          return { p, err, exit: new Promise<[number | null, string | null]>((r) => p.once('exit', (c, s) => r([c, s]))) };
        };
        const sidecars = () =>
          readdirSync('/proc')
            .filter((d) => /^\d+$/.test(d))
            .filter((d) => {
              try {
                return readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dir);
              } catch {
                return false;
              }
            })
            .map(Number)
            .filter((pid) => !procs.some((p) => p.pid === pid));
        const ready = async () => {
          for (const end = Date.now() + 20_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (check() === 0) return true;
          return false;
        };

        const a = start();
        expect(await ready()).toBe(true);
        const agentsSockets = nodePlan(env.CMESH_DEVICES, [], { ...env, CMESH_NCCL_SOCKET: template }).agents.map((x) => x.env.CMESH_NCCL_SOCKET);
        expect(
          readdirSync(dir)
            .map((f) => join(dir, f))
            .sort(),
        ).toEqual([...agentsSockets].sort());
        // connect() needs write permission: the agents' group has it even where the sidecars run as root (rdma)
        for (const s of agentsSockets) expect([s, statSync(s).mode & 0o070]).toEqual([s, 0o070]);
        expect(sidecars()).toHaveLength(Number(env.CMESH_DEVICES));
        // one sidecar killed: the launcher stops the others and fails, so the kubelet restarts the container
        process.kill(sidecars()[3], 'SIGKILL');
        const [code] = await a.exit;
        expect(code).not.toBe(0);
        expect(a.err.join('')).toMatch(/a sidecar exited with status 137; stopping the others/);
        expect(sidecars()).toEqual([]);
        // SIGTERM (the pod stopping): every sidecar stops, the launcher exits 0
        for (const f of readdirSync(dir)) rmSync(join(dir, f));
        const b = start();
        expect(await ready()).toBe(true);
        b.p.kill('SIGTERM');
        expect(await b.exit).toEqual([0, null]);
        expect(sidecars()).toEqual([]);
        // several sidecars cannot share one socket
        const shared = spawnSync(LAUNCHER, [], { env: { ...run, CMESH_NCCL_SOCKET: join(dir, 'nccl.sock') }, encoding: 'utf8' });
        expect([shared.status, shared.stderr]).toEqual([2, expect.stringContaining('sidecars cannot share one socket')]);
      } finally {
        for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});

describe('RDMA overlay', () => {
  it('is the GPU overlay with the RDMA resource, IPC_LOCK and NCCL_IB_HCA on the sidecar container alone', () => {
    const [g, r] = [daemonSet(gpu), daemonSet(rdma)];
    expect(container(r, 'agent')).toEqual(container(g, 'agent'));
    const [gs, rs] = [container(g, 'nccl-sidecar'), container(r, 'nccl-sidecar')];
    expect(rs.resources.limits).toEqual({ ...gs.resources.limits, 'rdma/rdma_shared_device_a': 1 });
    expect(rs.securityContext.capabilities).toEqual({ drop: ['ALL'], add: ['IPC_LOCK'] });
    // a non-root process would hold IPC_LOCK in its bounding set only: uid 0, that capability alone
    expect(rs.securityContext).toMatchObject({ runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(rs.env).toEqual([...gs.env, { name: 'NCCL_IB_HCA', value: 'mlx5' }, { name: 'NCCL_IB_DISABLE', value: '0' }]);
    // the agents' group keeps the sockets: the pod's gid
    expect(podSpec(r).securityContext.runAsGroup).toBe(1000);
    const strip = (o: K8sObject) => ({ ...o, spec: { ...o.spec, template: { ...o.spec.template, spec: { ...podSpec(o), containers: [] } } } });
    expect(strip(r)).toEqual(strip(g));
    for (const o of rdma.filter((x) => x.kind !== 'DaemonSet')) expect(o).toEqual(byKey(gpu).get(keyOf(o)));
  });
});

describe('host-network component', () => {
  const dir = mkdtempSync(join(ROOT, '.tmp', 'k8s-host-network-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    JSON.stringify({ resources: [relative(dir, join(ROOT, 'k8s/overlays/gpu'))], components: [relative(dir, join(ROOT, 'k8s/components/host-network'))] }),
  );

  it("puts the GPU pods in the host's network (cluster DNS kept), without the pod-only sysctl, NCCL on the host's interfaces; valid, as kubectl renders it", () => {
    const objs = renderKustomization(dir);
    if (hasKubectl) {
      const theirs = loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as K8sObject[];
      const by = byKey(theirs);
      for (const o of objs) expect([keyOf(o), o]).toEqual([keyOf(o), by.get(keyOf(o))]);
    }
    const ds = daemonSet(objs);
    expect(podSpec(ds)).toMatchObject({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' });
    expect(podSpec(ds).securityContext.sysctls).toBeUndefined();
    const ifname = container(ds, 'nccl-sidecar').env.find((e: any) => e.name === 'NCCL_SOCKET_IFNAME').value as string;
    expect(ifname.startsWith('^')).toBe(true);
    expect(ifname.slice(1).split(',')).toEqual(expect.arrayContaining(['lo', 'docker', 'veth']));
    for (const r of validate([ds])) expect(r).toEqual({ key: r.key, error: null });
    expect(strictFieldErrors([ds])).toEqual([]);
  }, 60_000);
});

describe('the nccl-sidecar image', () => {
  const dockerfile = readFileSync(join(ROOT, 'native/nccl-sidecar/Dockerfile'), 'utf8');
  /** libnccl2 of NVIDIA's runtime image for each CUDA base (its Dockerfile's NV_LIBNCCL_PACKAGE_VERSION). */
  const NCCL_OF_BASE: Record<string, string> = { '12.4.1': '2.21.5-1' };

  it('pins libnccl2 to the build of its CUDA base and holds it; ships the launcher the DaemonSet runs', () => {
    const base = /^FROM nvidia\/cuda:(\d+)\.(\d+)\.(\d+)-runtime-ubuntu[\d.]+ AS runtime$/m.exec(dockerfile);
    expect(base).not.toBeNull();
    const cuda = `${base![1]}.${base![2]}.${base![3]}`;
    const arg = (name: string) => new RegExp(`^ARG ${name}=(\\S+)$`, 'm').exec(dockerfile)?.[1];
    expect([cuda, arg('NCCL_VERSION')]).toEqual([cuda, NCCL_OF_BASE[cuda]]);
    expect(arg('NCCL_CUDA')).toBe(`${base![1]}.${base![2]}`);
    // every apt install of libnccl2 names the version; it is held and checked after
    const installed = [...dockerfile.matchAll(/apt-get install[^&\n]*/g)].flatMap((m) => m[0].split(/\s+/)).filter((w) => w.includes('libnccl'));
    expect(installed).toEqual(['"libnccl2=${NCCL_VERSION}+cuda${NCCL_CUDA}"']);
    expect(dockerfile).toMatch(/apt-mark hold libnccl2/);
    expect(dockerfile).toMatch(/dpkg-query -W -f='\$\{Version\}' libnccl2\)" = "\$\{NCCL_VERSION\}\+cuda\$\{NCCL_CUDA\}"/);
    const command = container(daemonSet(gpu), 'nccl-sidecar').command[0];
    expect(dockerfile).toContain(`COPY native/nccl-sidecar/node-sidecars.sh ${command}`);
    expect(statSync(LAUNCHER).mode & 0o111).toBe(0o111);
    // the docs name the same version
    expect(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8')).toContain(`libnccl2 ${NCCL_OF_BASE[cuda]}+cuda${base![1]}.${base![2]}`);
  });
});

function CMESH_SOCKET_DIR(template: string): string {
  return template.slice(0, template.lastIndexOf('/'));
}

it('cmesh secrets k8s --gpu-nodes: one login per device of each node (no StatefulSet logins unless --agents says), a node name checked', () => {
  const CMESH = join(ROOT, 'apps/cli/bin/cmesh.js');
  const run = (...args: string[]) => spawnSync(process.execPath, [CMESH, 'secrets', 'k8s', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  const agentKeys = (out: string) =>
    Object.keys((loadAll(out) as K8sObject[]).find((o) => o.metadata.name === K8S_SECRETS.agents)!.data as Record<string, string>);
  const r = run('--gpu-nodes', 'gpu-a.example.internal,gpu-b', '--gpu-nodes', 'gpu-c', '--gpus-per-node', '2');
  expect([r.status, r.stderr]).toEqual([0, '']);
  expect(agentKeys(r.stdout)).toEqual(nodeAgentNames(['gpu-a.example.internal', 'gpu-b', 'gpu-c'], 2).map(natsPasswordKey));
  expect(agentKeys(r.stdout)[0]).toBe('nats-password-gpu-a_example_internal-gpu0');
  const both = run('--agents', '1', '--gpu-nodes', 'gpu-a', '--gpus-per-node', '1');
  expect(agentKeys(both.stdout)).toEqual(['nats-password-rank-agent-0', 'nats-password-gpu-a-gpu0']);
  const bad = run('--gpu-nodes', 'GPU_A');
  expect([bad.status, bad.stderr]).toEqual([2, expect.stringContaining('--gpu-nodes "GPU_A": not a Kubernetes node name')]);
  const none = run('--agents', '0');
  expect([none.status, none.stderr]).toEqual([2, expect.stringContaining('no agents')]);
}, 120_000);

// the kustomization comment's secrets command is the one the test uses
it('the GPU overlay says how to make its logins, with the flags cmesh secrets k8s has', () => {
  const k = readFileSync(join(ROOT, 'k8s/overlays/gpu/kustomization.yaml'), 'utf8');
  expect(k).toMatch(/cmesh secrets k8s --agents 0 --gpu-nodes <node>,<node> --gpus-per-node 8 \| kubectl apply --server-side -f -/);
  expect((load(k) as any).namespace).toBe('cmesh');
});

/** A PodMonitor endpoint's job (its relabelings' `job`). */
const jobOf = (e: { relabelings?: { targetLabel?: string; replacement?: string }[] }) => e.relabelings?.find((r) => r.targetLabel === 'job')?.replacement;

/**
 * What the PodMonitors scrape of a GPU pod against what its agents serve, as the node mode plans
 * them: every agent's HTTP port (job cmesh-agent) and job-metrics port (cmesh-job) by exactly one
 * endpoint, and no endpoint on a port no agent serves. Each line a disagreement.
 */
function deviceScrapeErrors(objs: K8sObject[]): string[] {
  const ds = daemonSet(objs);
  const labels = ds.spec.template.metadata.labels as Record<string, string>;
  const monitors = objs.filter(
    (o) => o.kind === 'PodMonitor' && Object.entries(o.spec.selector.matchLabels as Record<string, string>).every(([k, v]) => labels[k] === v),
  );
  const ports = podSpec(ds).containers.flatMap((c: any) => c.ports ?? []) as { name: string; containerPort: number }[];
  // a PodMonitor endpoint's port is a container port's name: one without such a port gives no target
  const targets = monitors
    .flatMap((m) =>
      m.spec.podMetricsEndpoints.map((e: any) => ({
        at: `${m.metadata.name} ${e.port}`,
        job: jobOf(e),
        port: ports.find((p) => p.name === e.port)?.containerPort,
      })),
    )
    .filter((t) => t.port !== undefined);
  const env = kubeletEnv(objs, container(ds, 'agent'), { nodeName: NODES[0], podIP: '10.1.0.5', name: 'rank-agent-gpu-0' });
  const plan = nodePlan(env.CMESH_DEVICES, container(ds, 'agent').args ?? [], env);
  const errors: string[] = [];
  const served = new Set<string>();
  for (const a of plan.agents) {
    // the agent's HTTP port (its config) and its job worker's exporter (CMESH_METRICS_PORT of its environment)
    const agentEnv = { ...env, ...a.env };
    for (const [job, port] of [
      ['cmesh-agent', loadConfig([], agentEnv).httpPort],
      ['cmesh-job', Number(agentEnv.CMESH_METRICS_PORT)],
    ] as const) {
      served.add(`${job} ${port}`);
      const hits = targets.filter((t) => t.job === job && t.port === port);
      if (hits.length !== 1)
        errors.push(
          `device ${a.device} (${a.name}): ${hits.length} ${job} endpoints on its port ${port}${hits.length ? `: ${hits.map((t) => t.at).join(', ')}` : ''}`,
        );
    }
  }
  for (const t of targets) if (!served.has(`${t.job} ${t.port}`)) errors.push(`${t.at}: ${t.job} on port ${t.port}, which no agent serves so`);
  return errors;
}

describe('monitoring component with the GPU overlay: every agent of a pod is scraped', () => {
  const dir = mkdtempSync(join(ROOT, '.tmp', 'k8s-gpu-monitoring-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    JSON.stringify({ resources: [relative(dir, join(ROOT, 'k8s/overlays/gpu'))], components: [relative(dir, join(ROOT, 'k8s/components/monitoring'))] }),
  );
  const objs = renderKustomization(dir);
  const monitor = byKey(objs).get('PodMonitor/cmesh-agent-gpu')!;

  it('one endpoint per device and job, each on a distinct port that agent serves (the node mode’s port plan); valid, as kubectl renders it', () => {
    if (hasKubectl) {
      const theirs = byKey(loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as K8sObject[]);
      for (const o of objs) expect([keyOf(o), o]).toEqual([keyOf(o), theirs.get(keyOf(o))]);
    }
    const ds = daemonSet(objs);
    const n = Number(byKey(objs).get('ConfigMap/cmesh-agent')!.data.CMESH_DEVICES);
    expect(monitor.spec.podMetricsEndpoints.map((e: any) => [e.port, jobOf(e)])).toEqual([
      ...[...Array(n).keys()].map((i) => [`metrics-${i}`, 'cmesh-agent']),
      ...[...Array(n).keys()].map((i) => [`job-metrics-${i}`, 'cmesh-job']),
    ]);
    expect(deviceScrapeErrors(objs)).toEqual([]);
    // port names fit Kubernetes' IANA_SVC_NAME (15 characters at most)
    for (const p of container(ds, 'agent').ports) expect([p.name, /^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?!-)){0,13}[a-z0-9]$/.test(p.name)]).toEqual([p.name, true]);
    for (const r of validate([ds, monitor])) expect(r).toEqual({ key: r.key, error: null });
    expect(strictFieldErrors([ds, monitor])).toEqual([]);
    // the check bites: an endpoint missing, two on one port, a port renumbered, an endpoint on no agent's port
    const mutate = (f: (m: K8sObject, d: K8sObject) => void) => {
      const copy = structuredClone(objs);
      f(byKey(copy).get('PodMonitor/cmesh-agent-gpu')!, daemonSet(copy));
      return deviceScrapeErrors(copy);
    };
    const ep = (m: K8sObject) => m.spec.podMetricsEndpoints as any[];
    expect(mutate((m) => ep(m).splice(3, 1))).toEqual([`device 3 (${nodeAgentName(NODES[0], 3)}): 0 cmesh-agent endpoints on its port 9403`]);
    expect(mutate((m) => (ep(m)[n + 5].port = 'job-metrics-4'))).toEqual([
      `device 4 (${nodeAgentName(NODES[0], 4)}): 2 cmesh-job endpoints on its port 9504: cmesh-agent-gpu job-metrics-4, cmesh-agent-gpu job-metrics-4`,
      `device 5 (${nodeAgentName(NODES[0], 5)}): 0 cmesh-job endpoints on its port 9505`,
    ]);
    expect(mutate((_, d) => (container(d, 'agent').ports.find((p: any) => p.name === 'metrics-7').containerPort = 9408))).toEqual([
      `device 7 (${nodeAgentName(NODES[0], 7)}): 0 cmesh-agent endpoints on its port 9407`,
      'cmesh-agent-gpu metrics-7: cmesh-agent on port 9408, which no agent serves so',
    ]);
    // device 0 scraped twice: the agents' PodMonitor on a port named as the base's
    expect(mutate((_, d) => container(d, 'agent').ports.push({ name: 'http', containerPort: 9400 }))).toEqual([
      `device 0 (${nodeAgentName(NODES[0], 0)}): 2 cmesh-agent endpoints on its port 9400: cmesh-agent http, cmesh-agent-gpu metrics-0`,
    ]);
  }, 60_000);

  it('a real Prometheus, given the targets Kubernetes discovery makes of GPU and StatefulSet pods: one target per agent and job, labelled with the agent’s name (the PodMonitors as the operator makes them; the documented scrape job)', async () => {
    const ds = daemonSet(objs);
    const sts = byKey(base).get('StatefulSet/rank-agent')!;
    const sanitize = (k: string) => k.replace(/[^A-Za-z0-9_]/g, '_');
    // a node name with four dots: the most the relabelings turn into `_`
    const nodes = [...NODES, 'n1.rack2.dc3.example.com'];
    /** The pod role's targets of a pod: one per container port, one for a container without ports. */
    const discovered = (w: K8sObject, pod: string, node: string, ip: string) =>
      podSpec(w).containers.flatMap((c: any) =>
        (c.ports?.length ? c.ports : [undefined]).map((p: any) => ({
          targets: [p ? `${ip}:${p.containerPort}` : ip],
          labels: {
            __meta_kubernetes_namespace: 'cmesh',
            __meta_kubernetes_pod_name: pod,
            __meta_kubernetes_pod_node_name: node,
            __meta_kubernetes_pod_container_name: c.name,
            __meta_kubernetes_pod_phase: 'Running',
            ...Object.fromEntries(
              Object.entries(w.spec.template.metadata.labels as Record<string, string>).flatMap(([k, v]) => [
                [`__meta_kubernetes_pod_label_${sanitize(k)}`, v],
                [`__meta_kubernetes_pod_labelpresent_${sanitize(k)}`, 'true'],
              ]),
            ),
            ...(p ? { __meta_kubernetes_pod_container_port_name: p.name, __meta_kubernetes_pod_container_port_number: String(p.containerPort) } : {}),
          },
        })),
      );
    const ips = nodes.map((_, i) => `192.0.2.${10 + i}`);
    const groups = [
      ...nodes.flatMap((node, i) => discovered(ds, `rank-agent-gpu-${i}`, node, ips[i])),
      ...discovered(sts, 'rank-agent-0', 'cpu-a', '192.0.2.99'),
    ];
    const snake = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
    // what the Prometheus Operator generates for a PodMonitor endpoint with a port name
    // (pkg/prometheus/promcfg.go, generatePodMonitorConfig): the running filter, the selector's and
    // the port's keep, its own target labels, the default job and endpoint, then the endpoint's relabelings
    const operatorJobs = objs
      .filter((o) => o.kind === 'PodMonitor' && o.metadata.name.startsWith('cmesh-agent'))
      .flatMap((m) =>
        m.spec.podMetricsEndpoints.map((e: any, i: number) => ({
          job_name: `podMonitor/cmesh/${m.metadata.name}/${i}`,
          static_configs: groups,
          relabel_configs: [
            { source_labels: ['job'], target_label: '__tmp_prometheus_job_name' },
            { action: 'drop', source_labels: ['__meta_kubernetes_pod_phase'], regex: '(Failed|Succeeded)' },
            ...Object.entries(m.spec.selector.matchLabels as Record<string, string>).map(([k, v]) => ({
              action: 'keep',
              source_labels: [`__meta_kubernetes_pod_label_${sanitize(k)}`, `__meta_kubernetes_pod_labelpresent_${sanitize(k)}`],
              regex: `(${v});true`,
            })),
            { action: 'keep', source_labels: ['__meta_kubernetes_pod_container_port_name'], regex: e.port },
            { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
            { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
            { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
            { target_label: 'job', replacement: `cmesh/${m.metadata.name}` },
            { target_label: 'endpoint', replacement: e.port },
            ...e.relabelings.map(snake),
          ],
        })),
      );
    const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const [documented] = load(/\*\*Metrics\.\*\*[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)![1]) as any[];
    expect(documented.kubernetes_sd_configs).toEqual([{ role: 'pod', namespaces: { names: ['cmesh'] } }]);
    const { kubernetes_sd_configs: _sd, ...job } = documented;
    const tmp = mkdtempSync(join(tmpdir(), 'cmesh-gpu-scrape-'));
    const port = await freePort();
    writeFileSync(
      join(tmp, 'prometheus.yml'),
      JSON.stringify({ global: { scrape_interval: '1m' }, scrape_configs: [...operatorJobs, { ...job, static_configs: groups }] }),
    );
    const prom = spawn(
      'prometheus',
      [`--config.file=${join(tmp, 'prometheus.yml')}`, `--web.listen-address=127.0.0.1:${port}`, `--storage.tsdb.path=${join(tmp, 'data')}`],
      { stdio: 'ignore' },
    );
    try {
      type Target = { scrapePool: string; labels: Record<string, string> };
      let targets: Target[] = [];
      const seen = (pools: (p: string) => boolean) =>
        targets
          .filter((t) => pools(t.scrapePool))
          .map((t) => `${t.labels.job} ${t.labels.instance} ${t.labels.agent}`)
          .sort();
      const n = Number(byKey(objs).get('ConfigMap/cmesh-agent')!.data.CMESH_DEVICES);
      const gpuAgents = nodes.flatMap((node, i) =>
        [...Array(n).keys()].flatMap((d) => [
          `cmesh-agent ${ips[i]}:${9400 + d} ${nodeAgentName(node, d)}`,
          `cmesh-job ${ips[i]}:${9500 + d} ${nodeAgentName(node, d)}`,
        ]),
      );
      // the discovery manager hands targets over after its 5 s throttle, one scrape pool at a time:
      // wait until every pool has its targets (as many as expected), then compare
      const expected = gpuAgents.length * 2 + 2;
      for (const end = Date.now() + 30_000; Date.now() < end && targets.length < expected; await new Promise((r) => setTimeout(r, 500))) {
        targets = await fetch(`http://127.0.0.1:${port}/api/v1/targets`)
          .then((r) => r.json())
          .then((b: any) => b.data.activeTargets as Target[])
          .catch(() => []);
      }
      expect(seen((p) => p.startsWith('podMonitor/'))).toEqual(
        [...gpuAgents, 'cmesh-agent 192.0.2.99:9400 rank-agent-0', 'cmesh-job 192.0.2.99:9500 rank-agent-0'].sort(),
      );
      expect(seen((p) => p === documented.job_name)).toEqual([...gpuAgents].sort());
      expect(nodeAgentName(nodes[2], 0)).toBe('n1_rack2_dc3_example_com-gpu0');
    } finally {
      prom.kill('SIGKILL');
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 60_000);

  it('another GPU count, as docs/operations.md patches it: devices, GPUs, ports and endpoints agree, with and without the monitoring component', () => {
    const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const block = /\*\*Another GPU count\.\*\*[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)![1].replace(/^ {2}/gm, '');
    const k = load(
      block
        .replace('<path to k8s/overlays/gpu>', relative(dir, join(ROOT, 'k8s/overlays/gpu')))
        .replace('<path to k8s/components/monitoring>', relative(dir, join(ROOT, 'k8s/components/monitoring'))),
    ) as any;
    const count = Number(JSON.parse(k.patches[0].patch)[0].value);
    for (const components of [k.components, undefined]) {
      const other = mkdtempSync(join(dir, 'count-'));
      // without the component, without its PodMonitor's patch (the document says so)
      const patches = components ? k.patches : k.patches.filter((p: any) => p.target.kind !== 'PodMonitor');
      writeFileSync(
        join(other, 'kustomization.yaml'),
        JSON.stringify({
          ...k,
          patches,
          resources: k.resources.map((r: string) => relative(other, join(dir, r))),
          components: components?.map((c: string) => relative(other, join(dir, c))),
        }),
      );
      const objs4 = renderKustomization(other);
      if (hasKubectl) {
        const theirs = byKey(loadAll(execFileSync('kubectl', ['kustomize', other], { encoding: 'utf8' })) as K8sObject[]);
        expect(objs4.map(keyOf).sort()).toEqual([...theirs.keys()].sort());
        for (const o of objs4) expect([keyOf(o), o]).toEqual([keyOf(o), theirs.get(keyOf(o))]);
      }
      expect(byKey(objs4).get('ConfigMap/cmesh-agent')!.data.CMESH_DEVICES).toBe(String(count));
      expect(deviceCountErrors(objs4)).toEqual([]);
      if (components) expect(deviceScrapeErrors(objs4)).toEqual([]);
      const devices = [...Array(count).keys()];
      expect(container(daemonSet(objs4), 'agent').ports.map((p: any) => `${p.name} ${p.containerPort}`)).toEqual([
        ...devices.map((i) => `metrics-${i} ${9400 + i}`),
        ...devices.map((i) => `job-metrics-${i} ${9500 + i}`),
        'data 29500',
      ]);
      expect(byKey(objs4).has('PodMonitor/cmesh-agent-gpu')).toBe(components !== undefined);
      if (components) expect(byKey(objs4).get('PodMonitor/cmesh-agent-gpu')!.spec.podMetricsEndpoints).toHaveLength(2 * count);
    }
  }, 60_000);
});
