// Generates k8s/components/monitoring/prometheus-rule.yaml: the rules of
// dashboards/prometheus/rules/cmesh.rules.yml as a PrometheusRule for the Prometheus Operator, so
// both kinds of Prometheus load one set of rules. Run from the repo root:
// `node -r @swc-node/register dashboards/prometheus/generate-prometheus-rule.ts`.
// test/deploy/k8s.test.ts checks the file is up to date.
import { readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import { dump, load } from 'js-yaml';

export const RULES_PATH = join(__dirname, 'rules', 'cmesh.rules.yml');
export const PROMETHEUS_RULE_PATH = join(__dirname, '..', '..', 'k8s', 'components', 'monitoring', 'prometheus-rule.yaml');

export function prometheusRuleYaml(): string {
  const { groups } = load(readFileSync(RULES_PATH, 'utf8')) as { groups: unknown[] };
  const rule = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'cmesh', labels: { 'app.kubernetes.io/name': 'cmesh', 'app.kubernetes.io/part-of': 'cmesh' } },
    spec: { groups },
  };
  const header =
    '# Generated from dashboards/prometheus/rules/cmesh.rules.yml by\n# dashboards/prometheus/generate-prometheus-rule.ts: edit the rules there, then run it.\n';
  return header + dump(rule, { lineWidth: -1, noRefs: true });
}

if (require.main === module) writeFileSync(PROMETHEUS_RULE_PATH, prometheusRuleYaml());
