// docker-compose.yml and the Dockerfiles, checked without a Docker engine: `docker-compose config`
// (Debian's docker-compose, where installed), the Compose Specification schema (vendored, with
// ajv), and what the cluster needs: JetStream on, scalable agents, Prometheus and Grafana given
// this repository's config, rules, data source and dashboard. Dockerfiles: multi-stage, a non-root
// final stage, every COPY source present.
import { spawnSync } from 'child_process';
import { existsSync, readFileSync } from 'fs';
import { join, resolve } from 'path';
import Ajv2019 from 'ajv/dist/2019';
import { YAML11_SCHEMA, load } from 'js-yaml';

const ROOT = resolve(__dirname, '../..');
const COMPOSE = join(ROOT, 'docker-compose.yml');
// YAML 1.1 as Compose reads it: merge keys (<<: *node-app) included
const compose = load(readFileSync(COMPOSE, 'utf8'), { schema: YAML11_SCHEMA }) as any;
const services = compose.services as Record<string, any>;
const yaml = (p: string) => load(readFileSync(join(ROOT, p), 'utf8')) as any;

it('docker-compose config accepts the file (where Debian docker-compose is installed)', () => {
  const probe = spawnSync('docker-compose', ['version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    console.warn('docker-compose not installed: the compose file is checked by the schema test alone');
    return;
  }
  const r = spawnSync('docker-compose', ['-f', COMPOSE, '--profile', 'tools', 'config', '--services'], { cwd: ROOT, encoding: 'utf8' });
  expect(r.stderr.trim()).toBe('');
  expect(r.status).toBe(0);
  expect(r.stdout.trim().split('\n').sort()).toEqual(['auth-init', 'cli', 'coordinator', 'grafana', 'nats', 'prometheus', 'rank-agent', 'weights']);
}, 60_000);

it('validates against the Compose Specification schema, and the schema rejects a broken file', () => {
  const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
  // draft-04 leftovers of the file: its meta-schema as "http://…/schema#" (ajv knows "https://…"),
  // "id" for "$id", and informational "#/definitions/…" ids that ajv would take as anchors
  const { $schema: _meta, id: $id, ...rest } = JSON.parse(readFileSync(join(__dirname, 'schemas/compose-spec.json'), 'utf8'));
  const dropIds = (v: any): any =>
    Array.isArray(v) ? v.map(dropIds) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).filter(([k, x]) => !(k === 'id' && typeof x === 'string' && x.startsWith('#'))).map(([k, x]) => [k, dropIds(x)])) : v;
  const validate = ajv.compile({ $id, ...dropIds(rest) });
  expect([validate(compose), ajv.errorsText(validate.errors)]).toEqual([true, 'No errors']);
  const broken = structuredClone(compose);
  broken.services['rank-agent'].deploy.replicas = 'two';
  broken.services.nats.healthcheck.retry = 3;
  expect(validate(broken)).toBe(false);
  expect(ajv.errorsText(validate.errors)).toMatch(/replicas must be integer/);
  expect(ajv.errorsText(validate.errors)).toMatch(/must NOT have additional properties/);
});

it('runs NATS with JetStream on a volume, the coordinator and scalable agents after their dependencies', () => {
  expect(services.nats.command).toEqual(expect.arrayContaining(['--jetstream', '--store_dir', '/data']));
  expect(services.nats.volumes).toContain('nats-data:/data');
  expect(services.coordinator.depends_on.nats.condition).toBe('service_healthy');
  expect(services['rank-agent'].depends_on.coordinator.condition).toBe('service_healthy');
  // scalable: no fixed container name and no host ports on the agents
  const agent = services['rank-agent'];
  expect(agent.container_name).toBeUndefined();
  expect(agent.ports).toBeUndefined();
  expect(agent.deploy.replicas).toBeGreaterThanOrEqual(2);
  expect(agent.shm_size).toBe('1gb');
  for (const s of ['coordinator', 'rank-agent']) {
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
  expect(services.coordinator.environment).toMatchObject({ NATS_USER: 'coordinator', NATS_PASSWORD_FILE: '/secrets/nats/coordinator.password', CMESH_API_TOKEN_FILE: '/secrets/api-token' });
  expect(services['rank-agent'].environment).toMatchObject({ NATS_USER: 'agent', NATS_PASSWORD_FILE: '/secrets/nats/agent.password' });
  expect(services.cli.environment).toMatchObject({ NATS_USER: 'client', CMESH_API_TOKEN_FILE: '/secrets/api-token' });
  for (const s of ['nats', 'coordinator', 'rank-agent', 'cli']) expect(services[s].volumes).toContain('cmesh-secrets:/secrets:ro');
  // no secret value in the file itself
  expect(JSON.stringify(services)).not.toMatch(/PASSWORD"?:\s*"?[^/"]/);
});

it('Prometheus gets the rules and a config whose targets are the services; Grafana its provisioning', () => {
  const prom = services.prometheus;
  const mounts = Object.fromEntries((prom.volumes as string[]).map((v) => v.split(':')).map(([src, dst]) => [dst, src]));
  expect(mounts['/etc/prometheus/prometheus.yml']).toBe('./dashboards/prometheus/prometheus.yml');
  expect(mounts['/etc/prometheus/rules']).toBe('./dashboards/prometheus/rules');
  const cfg = yaml('dashboards/prometheus/prometheus.yml');
  expect(cfg.rule_files).toEqual(['/etc/prometheus/rules/*.yml']);
  const jobs = Object.fromEntries(cfg.scrape_configs.map((j: any) => [j.job_name, j]));
  expect(jobs['cmesh-coordinator'].static_configs[0].targets).toEqual([`coordinator:${services.coordinator.environment.HTTP_PORT}`]);
  expect(jobs['cmesh-agent'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent'], type: 'A', port: Number(services['rank-agent'].environment.CMESH_HTTP_PORT) });
  expect(jobs['cmesh-job'].dns_sd_configs[0]).toMatchObject({ names: ['rank-agent'], port: Number(services['rank-agent'].environment.CMESH_METRICS_PORT) });

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
      const args = c.split(/\s+/).slice(1).filter((a) => !a.startsWith('--'));
      for (const src of args.slice(0, -1)) expect([file, src, existsSync(join(ROOT, src))]).toEqual([file, src, true]);
    }
  });
});

it('publishes on 127.0.0.1 by default, host ports overridable (empty: Docker picks one)', () => {
  for (const [s, port] of [['nats', 4222], ['coordinator', 7700], ['prometheus', 9090], ['grafana', 3000]] as const) {
    const v = s === 'nats' ? 'NATS' : s.toUpperCase();
    expect(services[s].ports).toEqual([`\${CMESH_PUBLISH_ADDRESS:-127.0.0.1}:\${CMESH_${v}_PORT-${port}}:${port}`]);
  }
  expect(services['rank-agent'].ports).toBeUndefined();
});

it('.dockerignore keeps host node_modules and build outputs out of the build context', () => {
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const p of ['**/node_modules', '**/build', '.git']) expect(ignore).toContain(p);
});
