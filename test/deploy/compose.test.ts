// docker-compose.yml and the Dockerfiles, checked without a Docker engine: `docker-compose config`
// (Debian's docker-compose, where installed), the Compose Specification schema (vendored, with
// ajv), and what the cluster needs: JetStream on, one service and one NATS login per agent,
// Prometheus and Grafana given this repository's config, rules, data source and dashboard. Dockerfiles: multi-stage, a non-root
// final stage, every COPY source present.
import { spawnSync } from 'child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join, resolve } from 'path';
import Ajv2019 from 'ajv/dist/2019';
import { Command } from 'commander';
import { YAML11_SCHEMA, load } from 'js-yaml';
import { connect } from '@nats-io/transport-node';
import { AuthorizationError, NatsConnection } from '@nats-io/nats-core';
import { clusterNames } from '@cmesh/protocol';
import { startNatsServer } from '@cmesh/testing';
import { registerSecrets } from '@cmesh/cli/commands';

const ROOT = resolve(__dirname, '../..');
const COMPOSE = join(ROOT, 'docker-compose.yml');
// YAML 1.1 as Compose reads it: merge keys (<<: *node-app) included
const compose = load(readFileSync(COMPOSE, 'utf8'), { schema: YAML11_SCHEMA }) as any;
const services = compose.services as Record<string, any>;
const yaml = (p: string) => load(readFileSync(join(ROOT, p), 'utf8')) as any;
/** The agents' services, rank-agent-<i> in order. */
const AGENTS = Object.keys(services)
  .filter((s) => /^rank-agent-\d+$/.test(s))
  .sort((a, b) => Number(a.split('-').pop()) - Number(b.split('-').pop()));
/** auth-init's command line: `cmesh secrets init /secrets ...`, its flags. */
const initArgs =
  (services['auth-init'].entrypoint.join(' ') as string)
    .match(/cmesh\.js secrets init \/secrets ([^&]*)&&/)?.[1]
    .trim()
    .split(/\s+/) ?? [];
const flagValues = (flag: string) => initArgs.flatMap((a, i) => (a === flag ? [initArgs[i + 1]] : []));

it('docker-compose config accepts the file (where Debian docker-compose is installed)', () => {
  const probe = spawnSync('docker-compose', ['version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    console.warn('docker-compose not installed: the compose file is checked by the schema test alone');
    return;
  }
  const r = spawnSync('docker-compose', ['-f', COMPOSE, '--profile', 'tools', 'config', '--services'], { cwd: ROOT, encoding: 'utf8' });
  expect(r.stderr.trim()).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout.trim().split('\n').sort()).toEqual([
    'auth-init',
    'cli',
    'coordinator',
    'grafana',
    'nats',
    'nats-exporter',
    'prometheus',
    'rank-agent-0',
    'rank-agent-1',
    'weights',
  ]);
}, 60_000);

it("Prometheus scrapes NATS through the nats-exporter service, which reads the nats service's monitoring port", () => {
  const prom = load(readFileSync(join(ROOT, 'dashboards/prometheus/prometheus.yml'), 'utf8')) as {
    scrape_configs: { job_name: string; static_configs?: { targets: string[] }[] }[];
  };
  const job = prom.scrape_configs.find((j) => j.job_name === 'cmesh-nats')!;
  expect(job.static_configs).toEqual([{ targets: ['nats-exporter:7777'] }]);
  const monitor = services.nats.command[services.nats.command.indexOf('--http_port') + 1];
  const exporter = services['nats-exporter'];
  expect(exporter.command.at(-1)).toBe(`http://nats:${monitor}`);
  expect(exporter.command).toEqual(expect.arrayContaining(['-varz', '-connz', '-jsz=all', '-healthz']));
  // the rule that watches NATS reads that job
  expect(readFileSync(join(ROOT, 'dashboards/prometheus/rules/cmesh.rules.yml'), 'utf8')).toMatch(
    /alert: CmeshNatsDown\n\s+expr: absent\(up\{job="cmesh-nats"\} == 1\)/,
  );
});

it('validates against the Compose Specification schema, and the schema rejects a broken file', () => {
  const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
  // draft-04 leftovers of the file: its meta-schema as "http://…/schema#" (ajv knows "https://…"),
  // "id" for "$id", and informational "#/definitions/…" ids that ajv would take as anchors
  const { $schema: _meta, id: $id, ...rest } = JSON.parse(readFileSync(join(__dirname, 'schemas/compose-spec.json'), 'utf8'));
  const dropIds = (v: any): any =>
    Array.isArray(v)
      ? v.map(dropIds)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.entries(v)
              .filter(([k, x]) => !(k === 'id' && typeof x === 'string' && x.startsWith('#')))
              .map(([k, x]) => [k, dropIds(x)]),
          )
        : v;
  const validate = ajv.compile({ $id, ...dropIds(rest) });
  expect([validate(compose), ajv.errorsText(validate.errors)]).toEqual([true, 'No errors']);
  const broken = structuredClone(compose);
  broken.services.weights.deploy.replicas = 'two';
  broken.services.nats.healthcheck.retry = 3;
  expect(validate(broken)).toBe(false);
  expect(ajv.errorsText(validate.errors)).toMatch(/replicas must be integer/);
  expect(ajv.errorsText(validate.errors)).toMatch(/must NOT have additional properties/);
});

it('runs NATS with JetStream on a volume, the coordinator and the agents (one service each, one definition) after their dependencies', () => {
  expect(services.nats.command).toEqual(expect.arrayContaining(['--jetstream', '--store_dir', '/data']));
  expect(services.nats.volumes).toContain('nats-data:/data');
  expect(services.coordinator.depends_on.nats.condition).toBe('service_healthy');
  expect(AGENTS).toEqual(['rank-agent-0', 'rank-agent-1']);
  expect(services['rank-agent']).toBeUndefined();
  for (const [i, s] of AGENTS.entries()) {
    const agent = services[s];
    expect(agent.depends_on.coordinator.condition).toBe('service_healthy');
    // no fixed container name and no host ports on the agents
    expect(agent.container_name).toBeUndefined();
    expect(agent.ports).toBeUndefined();
    expect(agent.deploy).toBeUndefined();
    expect(agent.shm_size).toBe('1gb');
    // one definition (the x-rank-agent anchor): the services differ in their agent's name and login only
    const { environment, ...rest } = agent;
    const { environment: env0, ...rest0 } = services[AGENTS[0]];
    expect(rest).toEqual(rest0);
    const own = ['CMESH_AGENT_NAME', 'NATS_USER', 'NATS_PASSWORD_FILE'];
    const shared = (e: Record<string, string>) => Object.fromEntries(Object.entries(e).filter(([k]) => !own.includes(k)));
    expect(shared(environment)).toEqual(shared(env0));
    expect(environment.CMESH_AGENT_NAME).toBe(`agent-${i}`);
  }
  for (const s of ['coordinator', ...AGENTS]) {
    expect(services[s].environment.NATS_URL).toBe('nats://nats:4222');
    expect(services[s].security_opt).toEqual(['no-new-privileges:true']); // merged from x-node-app
    expect(existsSync(join(ROOT, services[s].build.dockerfile))).toBe(true);
    expect(services[s].build.context).toBe('.');
  }
});

it('authentication on: auth-init makes the secrets before NATS starts; every process logs in with its own role', () => {
  expect(services['auth-init'].entrypoint.join(' ')).toMatch(/cmesh\.js secrets init \/secrets/);
  expect(services.nats.depends_on['auth-init'].condition).toBe('service_completed_successfully');
  expect(services.nats.command.slice(0, 2)).toEqual(['-c', '/secrets/nats/nats-server.conf']);
  expect(services.coordinator.environment).toMatchObject({
    NATS_USER: 'coordinator',
    NATS_PASSWORD_FILE: '/secrets/nats/coordinator.password',
    CMESH_API_TOKEN_FILE: '/secrets/api-token',
  });
  expect(services.cli.environment).toMatchObject({ NATS_USER: 'client', CMESH_API_TOKEN_FILE: '/secrets/api-token' });
  for (const s of ['nats', 'coordinator', ...AGENTS, 'cli']) expect(services[s].volumes).toContain('cmesh-secrets:/secrets:ro');
  // no secret value in the file itself
  expect(JSON.stringify(services)).not.toMatch(/PASSWORD"?:\s*"?[^/"]/);
});

it('one NATS login per agent, its user the agent id, every one made by auth-init; a second tenant', () => {
  const logins = AGENTS.map((s) => services[s].environment);
  // the agent's id (its name, CMESH_AGENT_ID unset) is its NATS user: the rank agent refuses to start otherwise
  for (const e of logins) {
    expect(e.CMESH_AGENT_ID).toBeUndefined();
    expect(e.NATS_USER).toBe(e.CMESH_AGENT_NAME);
    expect(e.NATS_PASSWORD_FILE).toBe(`/secrets/nats/${e.NATS_USER}.password`);
  }
  // each agent's login is its own: no user shared, no shared `agent` login left
  expect(new Set(logins.map((e) => e.NATS_USER)).size).toBe(AGENTS.length);
  expect(new Set(logins.map((e) => e.NATS_PASSWORD_FILE)).size).toBe(AGENTS.length);
  expect(JSON.stringify(services)).not.toMatch(/"NATS_USER":"agent"|\/agent\.password/);
  // auth-init makes exactly these agents' logins (secrets init names them agent-0 .. agent-<n-1>)
  expect(flagValues('--agents')).toEqual([String(AGENTS.length)]);
  expect(flagValues('--agent-prefix')).toEqual([]);
  expect(logins.map((e) => e.NATS_USER)).toEqual(AGENTS.map((_, i) => `agent-${i}`));
  // tenants: client (the cli service) and team-b (the weights example), each with its own login
  expect(flagValues('--tenant')).toEqual(['team-b']);
  expect(services.weights.environment).toMatchObject({ NATS_USER: 'team-b', NATS_PASSWORD_FILE: '/secrets/nats/team-b.password' });
  expect(services.cli.environment.NATS_PASSWORD_FILE).toBe('/secrets/nats/client.password');
});

it("auth-init's `cmesh secrets init`, run here: a password per agent and tenant; nats-server admits each agent with its own only, on its own subjects", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cmesh-compose-secrets-'));
  const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const init = async () => {
    const program = new Command().exitOverride();
    registerSecrets(program);
    await program.parseAsync(['secrets', 'init', dir, ...initArgs], { from: 'user' });
  };
  const conns: { close(): Promise<void> }[] = [];
  let nats: Awaited<ReturnType<typeof startNatsServer>> | undefined;
  try {
    await init();
    const file = (p: string) => readFileSync(join(dir, p), 'utf8').trim();
    const logins = ['coordinator', ...AGENTS.map((s) => services[s].environment.NATS_USER), 'client', 'team-b'];
    expect(readdirSync(join(dir, 'nats')).sort()).toEqual([...logins.map((u) => `${u}.password`), 'nats-server.conf'].sort());
    const passwords = logins.map((u) => file(`nats/${u}.password`));
    expect(new Set(passwords).size).toBe(logins.length);
    // a second start (compose runs auth-init every time) keeps every secret
    await init();
    expect(logins.map((u) => file(`nats/${u}.password`))).toEqual(passwords);
    nats = await startNatsServer({ config: readFileSync(join(dir, 'nats/nats-server.conf'), 'utf8') });
    const servers = nats.url;
    const pass = (u: string) => file(`nats/${u}.password`);
    const login = async (user: string) => {
      const nc: NatsConnection = await connect({ servers, user, pass: pass(user), inboxPrefix: `_INBOX.${user}`, reconnect: false });
      conns.push(nc);
      return nc;
    };
    await expect(connect({ servers, user: 'agent-1', pass: pass('agent-0'), reconnect: false })).rejects.toThrow(AuthorizationError);
    await expect(connect({ servers, user: 'agent', pass: pass('agent-0'), reconnect: false })).rejects.toThrow(AuthorizationError);
    const names = clusterNames(services.coordinator.environment.CMESH_CLUSTER === 'default' ? undefined : services.coordinator.environment.CMESH_CLUSTER);
    const coordinator = await login('coordinator');
    const agent1 = await login('agent-1');
    await login('team-b');
    const seen: string[] = [];
    coordinator.subscribe(names.agents.heartbeatWildcard, {
      callback: (_e, m) => {
        seen.push(m.subject);
      },
    });
    await coordinator.flush();
    // in order on one connection: had the forged heartbeat been let through, it would arrive first
    agent1.publish(names.agents.heartbeat('agent-0'));
    agent1.publish(names.agents.heartbeat('agent-1'));
    await agent1.flush().catch(() => undefined);
    for (const end = Date.now() + 5000; seen.length === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([names.agents.heartbeat('agent-1')]);
  } finally {
    out.mockRestore();
    for (const nc of conns) await nc.close().catch(() => undefined);
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);

it('Prometheus gets the rules and a config whose targets are the services; Grafana its provisioning', () => {
  const prom = services.prometheus;
  const mounts = Object.fromEntries((prom.volumes as string[]).map((v) => v.split(':')).map(([src, dst]) => [dst, src]));
  expect(mounts['/etc/prometheus/prometheus.yml']).toBe('./dashboards/prometheus/prometheus.yml');
  expect(mounts['/etc/prometheus/rules']).toBe('./dashboards/prometheus/rules');
  const cfg = yaml('dashboards/prometheus/prometheus.yml');
  expect(cfg.rule_files).toEqual(['/etc/prometheus/rules/*.yml']);
  const jobs = Object.fromEntries(cfg.scrape_configs.map((j: any) => [j.job_name, j]));
  expect(jobs['cmesh-coordinator'].static_configs[0].targets).toEqual([`coordinator:${services.coordinator.environment.HTTP_PORT}`]);
  // every agent service answers to the alias rank-agent on the compose network: one A record each
  for (const s of AGENTS) {
    expect(services[s].networks.default.aliases).toContain('rank-agent');
    expect(services[s].environment.CMESH_HTTP_PORT).toBe(services[AGENTS[0]].environment.CMESH_HTTP_PORT);
    expect(services[s].environment.CMESH_METRICS_PORT).toBe(services[AGENTS[0]].environment.CMESH_METRICS_PORT);
  }
  expect(jobs['cmesh-agent'].dns_sd_configs[0]).toMatchObject({
    names: ['rank-agent'],
    type: 'A',
    port: Number(services[AGENTS[0]].environment.CMESH_HTTP_PORT),
  });
  expect(jobs['cmesh-job'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent'], port: Number(services[AGENTS[0]].environment.CMESH_METRICS_PORT) });

  const graf = services.grafana;
  const gm = Object.fromEntries((graf.volumes as string[]).map((v) => v.split(':')).map(([src, dst]) => [dst, src]));
  expect(gm['/etc/grafana/provisioning']).toBe('./dashboards/grafana/provisioning');
  const provider = yaml('dashboards/grafana/provisioning/dashboards/cmesh.yml').providers[0];
  expect(gm[provider.options.path]).toBe('./dashboards/grafana/dashboards');
  expect(existsSync(join(ROOT, 'dashboards/grafana/dashboards/cmesh-overview.json'))).toBe(true);
  const ds = yaml('dashboards/grafana/provisioning/datasources/prometheus.yml').datasources[0];
  expect(ds.url).toBe(`http://prometheus:${prom.ports[0].split(':').pop()}`);
  expect(graf.depends_on.prometheus.condition).toBe('service_healthy');
});

describe.each(['apps/coordinator/Dockerfile', 'apps/rank-agent/Dockerfile', 'apps/cli/Dockerfile', 'native/nccl-sidecar/Dockerfile'])('%s', (file) => {
  const lines = readFileSync(join(ROOT, file), 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages = lines.map((l, i) => [l, i] as const).filter(([l]) => /^FROM /i.test(l));

  it('is multi-stage and ends as a non-root user with a command', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const last = lines.slice(stages[stages.length - 1][1]);
    const users = last.filter((l) => /^USER /i.test(l)).map((l) => l.split(/\s+/)[1]);
    expect(users.length).toBeGreaterThan(0);
    expect(['root', '0', '0:0']).not.toContain(users[users.length - 1]);
    expect(last.some((l) => /^(CMD|ENTRYPOINT) /i.test(l))).toBe(true);
    // the final stage copies from an earlier one
    expect(last.some((l) => /^COPY --from=/i.test(l))).toBe(true);
  });

  it('copies only paths that exist in the repository (build context: the root)', () => {
    const copies = lines.filter((l) => /^COPY /i.test(l) && !/--from=/i.test(l));
    expect(copies.length).toBeGreaterThan(0);
    for (const c of copies) {
      const args = c
        .split(/\s+/)
        .slice(1)
        .filter((a) => !a.startsWith('--'));
      for (const src of args.slice(0, -1)) expect([file, src, existsSync(join(ROOT, src))]).toEqual([file, src, true]);
    }
  });
});

it('publishes on 127.0.0.1 by default, host ports overridable (empty: Docker picks one)', () => {
  for (const [s, port] of [
    ['nats', 4222],
    ['coordinator', 7700],
    ['prometheus', 9090],
    ['grafana', 3000],
  ] as const) {
    const v = s === 'nats' ? 'NATS' : s.toUpperCase();
    expect(services[s].ports).toEqual([`\${CMESH_PUBLISH_ADDRESS:-127.0.0.1}:\${CMESH_${v}_PORT-${port}}:${port}`]);
  }
  for (const s of AGENTS) expect(services[s].ports).toBeUndefined();
});

it('.dockerignore keeps host node_modules and build outputs out of the build context', () => {
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const p of ['**/node_modules', '**/build', '.git']) expect(ignore).toContain(p);
});
