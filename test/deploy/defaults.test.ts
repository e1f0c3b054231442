// The defaults a user meets are the same everywhere: the coordinator's and the agent's settings
// schemas, `cmesh up`, the CLI's coordinator address, docker-compose.yml and k8s/base. A
// deployment may set what a container needs (0.0.0.0, fixed agent ports for Prometheus), but
// never a different port, NATS address, cluster or heartbeat than the apps' own defaults.
import { readFileSync } from 'fs';
import { join, resolve } from 'path';
import { Command } from 'commander';
import { YAML11_SCHEMA, load } from 'js-yaml';
import { CoordinatorSettings } from '@cmesh/coordinator/config';
import { AgentSettings } from '@cmesh/rank-agent/config';
import { registerUp } from '@cmesh/cli/commands';
import { DEFAULT_COORDINATOR } from '@cmesh/testing/mesh';
import { byKey, renderKustomization } from './support/kustomize';

const ROOT = resolve(__dirname, '../..');
const compose = load(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { schema: YAML11_SCHEMA }) as any;
const k8s = byKey(renderKustomization(join(ROOT, 'k8s/base')));
const coordinator = CoordinatorSettings.parse({});
const agent = AgentSettings.parse({});
const upDefault = (flag: string) => {
  const program = new Command();
  registerUp(program);
  return program.commands.find((c) => c.name() === 'up')!.options.find((o) => o.long === flag)!.defaultValue as string;
};
const portOf = (url: string) => new URL(url).port;
/** compose's agents: one service each (rank-agent-0, rank-agent-1, ...) */
const composeAgents = Object.keys(compose.services).filter((s) => /^rank-agent-\d+$/.test(s));
const k8sEnv = (kind: string, name: string): Record<string, string> => {
  const c = k8s.get(`${kind}/${name}`)!.spec.template.spec.containers[0];
  const fromMaps = (c.envFrom ?? []).map((e: any) => k8s.get(`ConfigMap/${e.configMapRef.name}`)!.data);
  return Object.assign({}, ...fromMaps, Object.fromEntries((c.env ?? []).filter((e: any) => 'value' in e).map((e: any) => [e.name, e.value])));
};

it("the coordinator's HTTP port: 7700 in the app, cmesh up, the CLI, compose and k8s", () => {
  expect(coordinator.httpPort).toBe(7700);
  expect(Number(upDefault('--port'))).toBe(coordinator.httpPort);
  expect(Number(portOf(DEFAULT_COORDINATOR))).toBe(coordinator.httpPort);
  expect(Number(compose.services.coordinator.environment.HTTP_PORT)).toBe(coordinator.httpPort);
  expect(compose.services.coordinator.ports[0]).toMatch(new RegExp(`:${coordinator.httpPort}$`));
  expect(Number(portOf(compose.services.cli.environment.CMESH_COORDINATOR))).toBe(coordinator.httpPort);
  expect(Number(k8sEnv('Deployment', 'coordinator').HTTP_PORT)).toBe(coordinator.httpPort);
  expect(k8s.get('Deployment/coordinator')!.spec.template.spec.containers[0].ports[0].containerPort).toBe(coordinator.httpPort);
});

it("NATS on 4222 for both apps, cmesh up's nats-server, compose and k8s", () => {
  expect(portOf(coordinator.natsUrl)).toBe('4222');
  expect(agent.natsUrl).toBe(coordinator.natsUrl);
  expect(upDefault('--nats-port')).toBe('4222');
  expect(composeAgents.length).toBeGreaterThanOrEqual(2);
  for (const s of ['coordinator', ...composeAgents]) expect(portOf(compose.services[s].environment.NATS_URL)).toBe('4222');
  expect(portOf(k8sEnv('Deployment', 'coordinator').NATS_URL)).toBe('4222');
  expect(portOf(k8sEnv('StatefulSet', 'rank-agent').NATS_URL)).toBe('4222');
});

it('one cluster and one heartbeat interval for the coordinator and the agents everywhere', () => {
  expect(agent.cluster).toBe(coordinator.cluster);
  expect(agent.heartbeatMs).toBe(coordinator.heartbeatMs);
  for (const s of ['coordinator', ...composeAgents]) expect(compose.services[s].environment.CMESH_CLUSTER ?? coordinator.cluster).toBe(coordinator.cluster);
  for (const [kind, name] of [
    ['Deployment', 'coordinator'],
    ['StatefulSet', 'rank-agent'],
  ]) {
    const env = k8sEnv(kind, name);
    expect(env.CMESH_CLUSTER ?? coordinator.cluster).toBe(coordinator.cluster);
    expect(Number(env.CMESH_HEARTBEAT_MS ?? coordinator.heartbeatMs)).toBe(coordinator.heartbeatMs);
  }
});
