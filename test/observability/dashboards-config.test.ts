// The dashboards folder checked by Prometheus' own tools and against itself: promtool accepts the
// rules, both Prometheus configs and the rule unit tests (thresholds, labels, annotations); every
// alert links its runbook in docs/operations.md and waits long enough not to flap; the dashboard
// JSON is what the generator makes, its data source, cluster and jobs are variables; the job
// names the rules rely on are the ones the configs scrape.
import { execFileSync } from 'child_process';
import { readFileSync } from 'fs';
import { join, resolve } from 'path';
import { load } from 'js-yaml';
import { dashboardJson } from '../../dashboards/grafana/generate-dashboard';
import { dashboardExpressions, ruleFileRules } from './support/expressions';

const D = resolve(__dirname, '../../dashboards');
const promtool = (...args: string[]) => execFileSync('promtool', args, { cwd: join(D, 'prometheus'), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const yaml = (p: string) => load(readFileSync(join(D, p), 'utf8')) as any;

const RUNBOOKS = resolve(__dirname, '../../docs/operations.md');
/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

it('promtool checks the rules, both configs, and the rule unit tests pass', () => {
  expect(promtool('check', 'rules', 'rules/cmesh.rules.yml')).toMatch(/SUCCESS: 15 rules found/);
  for (const c of ['prometheus.yml', 'prometheus-k8s.yml']) expect(promtool('check', 'config', c)).toMatch(/SUCCESS/);
  expect(promtool('test', 'rules', 'tests/cmesh-rules.test.yml')).toMatch(/SUCCESS/);
});

it('every alert: a severity, a runbook_url to its section of docs/operations.md, and a for: that rides out one bad scrape', () => {
  const alerts = (yaml('prometheus/rules/cmesh.rules.yml').groups as { rules: any[] }[]).flatMap((g) => g.rules).filter((r) => r.alert);
  expect(alerts.map((a) => a.alert)).toEqual(
    expect.arrayContaining(['CmeshCoordinatorDown', 'CmeshNatsDown', 'CmeshRejectedMessages', 'CmeshAgentHeartbeatLate']),
  );
  const repo = JSON.parse(readFileSync(resolve(__dirname, '../../apps/cli/package.json'), 'utf8'))
    .repository.url.replace(/^git\+/, '')
    .replace(/\.git$/, '');
  const headings = new Set([...readFileSync(RUNBOOKS, 'utf8').matchAll(/^#{2,4} (.+)$/gm)].map((m) => anchor(m[1])));
  const seconds = (d: string) => Number(/^(\d+)([smh])$/.exec(d)![1]) * { s: 1, m: 60, h: 3600 }[/[smh]$/.exec(d)![0] as 's' | 'm' | 'h'];
  // these judge a window already (increase over 5m, two scans in a row, the last sweep's value)
  const windowed = ['CmeshBusbwBelowFloor', 'CmeshCollectiveErrors', 'CmeshAgentSlowInScans'];
  for (const a of alerts) {
    expect([a.alert, a.labels.severity]).toEqual([a.alert, expect.stringMatching(/^(warning|critical)$/)]);
    const url: string = a.annotations.runbook_url;
    expect([a.alert, url]).toEqual([a.alert, `${repo}/blob/main/docs/operations.md#${a.alert.toLowerCase()}`]);
    expect([a.alert, headings.has(url.split('#')[1])]).toEqual([a.alert, true]);
    if (!windowed.includes(a.alert)) expect([a.alert, seconds(a.for) >= 60]).toEqual([a.alert, true]);
  }
});

it('the dashboard JSON is the generated one; data source, cluster and jobs are variables, nothing fixed', () => {
  const text = readFileSync(join(D, 'grafana/dashboards/cmesh-overview.json'), 'utf8');
  expect(text).toBe(dashboardJson());
  const dash = JSON.parse(text);
  const vars = Object.fromEntries(dash.templating.list.map((v: { name: string }) => [v.name, v]));
  expect(vars.datasource).toMatchObject({ type: 'datasource', query: 'prometheus' });
  expect(vars.cluster.definition).toBe('label_values(cmesh_component_info, cluster)');
  expect(vars.coordinator_job.definition).toMatch(/component="coordinator"\}, job\)$/);
  expect(vars.agent_job.definition).toMatch(/component="agent"\}, job\)$/);
  // the data source of every panel, target and variable is the variable; no uid is written down
  expect([...text.matchAll(/"uid": "([^"]*)"/g)].map((m) => m[1]).filter((u) => u !== '${datasource}' && u !== 'cmesh-overview')).toEqual([]);
  const panels = dash.panels.filter((p: { type: string }) => p.type !== 'row');
  expect(panels.length).toBeGreaterThanOrEqual(15);
  for (const p of panels) {
    expect([p.title, p.datasource.uid]).toEqual([p.title, '${datasource}']);
    for (const t of p.targets) {
      expect([p.title, t.datasource.uid]).toEqual([p.title, '${datasource}']);
      // no job name written down; every cmesh or process series within the cluster picked
      expect([p.title, t.expr]).toEqual([p.title, expect.not.stringMatching(/job="|cmesh-/)]);
      for (const m of t.expr.matchAll(/\b(?:cmesh|process)_\w+(\{[^}]*\})?/g))
        expect([p.title, m[0]]).toEqual([p.title, expect.stringContaining('cluster=~"$cluster"')]);
    }
  }
  // what the issue asks the dashboard to show
  const all = dashboardExpressions(dash)
    .map((e) => e.expr)
    .join('\n');
  for (const m of [
    'cmesh_collective_busbw_bytes_per_second',
    'cmesh_collective_duration_seconds_bucket',
    'cmesh_collective_errors_total',
    'cmesh_agents',
    'cmesh_agent_heartbeat_gap_seconds',
    'cmesh_collective_bytes_total',
    'cmesh_service_op_duration_seconds_bucket',
    'cmesh_service_op_bus_bytes_total',
    'cmesh_service_op_errors_total',
  ]) {
    expect([m, all.includes(m)]).toEqual([m, true]);
  }
  expect(all).toMatch(/histogram_quantile\(0\.99,/);
  expect(all).not.toContain('size_bytes');
});

it('the job names used by the rules are scraped by both Prometheus configs', () => {
  const used = new Set<string>();
  for (const e of ruleFileRules(readFileSync(join(D, 'prometheus/rules/cmesh.rules.yml'), 'utf8')).map((r) => r.expr))
    for (const m of e.matchAll(/job="([^"]+)"/g)) used.add(m[1]);
  expect([...used].sort()).toEqual(['cmesh-agent', 'cmesh-coordinator', 'cmesh-nats']);
  for (const c of ['prometheus/prometheus.yml', 'prometheus/prometheus-k8s.yml']) {
    const jobs = yaml(c).scrape_configs.map((s: { job_name: string }) => s.job_name);
    for (const j of [...used, 'cmesh-job']) expect([c, j, jobs.includes(j)]).toEqual([c, j, true]);
  }
});
