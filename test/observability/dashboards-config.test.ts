// The dashboards folder checked by Prometheus' own tools and against itself: promtool accepts the
// rules, both Prometheus configs and the rule unit tests (thresholds, labels, annotations); the
// dashboard JSON is what the generator makes; every panel uses the provisioned data source; the
// job names the rules and the dashboard rely on are the ones the configs scrape.
import { execFileSync } from 'child_process';
import { readFileSync } from 'fs';
import { join, resolve } from 'path';
import { load } from 'js-yaml';
import { dashboardJson } from '../../dashboards/grafana/generate-dashboard';
import { dashboardExpressions, ruleFileRules } from './support/expressions';

const D = resolve(__dirname, '../../dashboards');
const promtool = (...args: string[]) => execFileSync('promtool', args, { cwd: join(D, 'prometheus'), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const yaml = (p: string) => load(readFileSync(join(D, p), 'utf8')) as any;

it('promtool checks the rules, both configs, and the rule unit tests pass', () => {
  expect(promtool('check', 'rules', 'rules/cmesh.rules.yml')).toMatch(/SUCCESS: 12 rules found/);
  for (const c of ['prometheus.yml', 'prometheus-k8s.yml']) expect(promtool('check', 'config', c)).toMatch(/SUCCESS/);
  expect(promtool('test', 'rules', 'tests/cmesh-rules.test.yml')).toMatch(/SUCCESS/);
});

it('the dashboard JSON is the generated one and every panel uses the provisioned data source', () => {
  const text = readFileSync(join(D, 'grafana/dashboards/cmesh-overview.json'), 'utf8');
  expect(text).toBe(dashboardJson());
  const dash = JSON.parse(text);
  const uid = yaml('grafana/provisioning/datasources/prometheus.yml').datasources[0].uid;
  expect(uid).toBe('cmesh-prometheus');
  const panels = dash.panels.filter((p: { type: string }) => p.type !== 'row');
  expect(panels.length).toBeGreaterThanOrEqual(15);
  for (const p of panels) {
    expect([p.title, p.datasource.uid]).toEqual([p.title, uid]);
    for (const t of p.targets) expect([p.title, t.datasource.uid]).toEqual([p.title, uid]);
  }
  // what the issue asks the dashboard to show
  const all = dashboardExpressions(dash).map((e) => e.expr).join('\n');
  for (const m of ['cmesh_collective_busbw_bytes_per_second', 'cmesh_collective_duration_seconds_bucket', 'cmesh_collective_errors_total', 'cmesh_agents', 'cmesh_agent_heartbeat_gap_seconds', 'cmesh_collective_bytes_total', 'cmesh_service_op_duration_seconds_bucket', 'cmesh_service_op_bus_bytes_total', 'cmesh_service_op_errors_total']) {
    expect([m, all.includes(m)]).toEqual([m, true]);
  }
  expect(all).toMatch(/histogram_quantile\(0\.99,/);
});

it('the job names used by the rules and the dashboard are scraped by both Prometheus configs', () => {
  const used = new Set<string>();
  const exprs = [...ruleFileRules(readFileSync(join(D, 'prometheus/rules/cmesh.rules.yml'), 'utf8')).map((r) => r.expr), ...dashboardExpressions(JSON.parse(readFileSync(join(D, 'grafana/dashboards/cmesh-overview.json'), 'utf8'))).map((e) => e.expr)];
  for (const e of exprs) for (const m of e.matchAll(/job="([^"]+)"/g)) used.add(m[1]);
  expect([...used].sort()).toEqual(['cmesh-agent', 'cmesh-coordinator']);
  for (const c of ['prometheus/prometheus.yml', 'prometheus/prometheus-k8s.yml']) {
    const jobs = yaml(c).scrape_configs.map((s: { job_name: string }) => s.job_name);
    for (const j of [...used, 'cmesh-job']) expect([c, j, jobs.includes(j)]).toEqual([c, j, true]);
  }
});
