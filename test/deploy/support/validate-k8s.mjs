// Validates Kubernetes objects (a JSON array on stdin) against the upstream API schemas compiled
// into the kubernetes-models package (ESM only, hence this separate script), and the Prometheus
// Operator's kinds against its CRDs' schemas (@kubernetes-models/prometheus-operator). Prints one
// result per object: {key, error}.
import { readFileSync } from 'fs';

const objs = JSON.parse(readFileSync(0, 'utf8'));
const results = [];
for (const o of objs) {
  const key = `${o.kind}/${o.metadata?.name}`;
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  try {
    const mod = await import(
      group === 'monitoring.coreos.com'
        ? `@kubernetes-models/prometheus-operator/${group}/${version}`
        : `kubernetes-models/${group ? `${group}/` : ''}${version}`
    );
    const Model = mod[o.kind];
    if (!Model) throw new Error(`unknown kind ${o.kind} in ${o.apiVersion}`);
    new Model(o).validate();
    results.push({ key, error: null });
  } catch (e) {
    results.push({ key, error: e.message });
  }
}
process.stdout.write(JSON.stringify(results));
