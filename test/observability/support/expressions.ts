// The PromQL of the Grafana dashboard and of the rule file, made runnable against Prometheus:
// Grafana's variables get the values of an "All" selection (the jobs: the ones the test's
// Prometheus scrapes, which the variables' queries find) and a short range.
import { load } from 'js-yaml';

export const GRAFANA_VARIABLES: Record<string, string> = {
  $__rate_interval: '1m',
  $__range: '5m',
  $__interval: '15s',
  $op: '.*',
  $cluster: '.*',
  $coordinator_job: 'cmesh-coordinator',
  $agent_job: 'cmesh-agent',
};

export function substituteVariables(expr: string): string {
  let out = expr;
  // longest names first: $__rate_interval before $__range's prefix, $op alone
  for (const [name, value] of Object.entries(GRAFANA_VARIABLES).sort((a, b) => b[0].length - a[0].length)) out = out.split(name).join(value);
  if (/\$\w/.test(out)) throw new Error(`unknown Grafana variable in ${expr}`);
  return out;
}

interface Panel {
  title?: string;
  type?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

/** Every target expression of every panel (rows included), plus the template variables' queries. */
export function dashboardExpressions(dashboard: {
  panels?: Panel[];
  templating?: { list?: { name: string; definition?: string }[] };
}): { title: string; expr: string }[] {
  const out: { title: string; expr: string }[] = [];
  const walk = (panels: Panel[] = []) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ title: p.title ?? '', expr: substituteVariables(t.expr) });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) {
    const m = /^label_values\((.+),\s*(\w+)\)$/.exec(v.definition ?? '');
    if (m) out.push({ title: `variable ${v.name}`, expr: substituteVariables(`group by (${m[2]}) (${m[1]})`) });
  }
  return out;
}

export interface RuleSpec {
  name: string;
  kind: 'record' | 'alert';
  expr: string;
}

export function ruleFileRules(yamlText: string): RuleSpec[] {
  const doc = load(yamlText) as { groups: { rules: { record?: string; alert?: string; expr: string }[] }[] };
  return doc.groups.flatMap((g) =>
    g.rules.map((r) => ({ name: (r.record ?? r.alert)!, kind: r.record ? ('record' as const) : ('alert' as const), expr: String(r.expr) })),
  );
}
