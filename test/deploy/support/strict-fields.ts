// kubeconform --strict without kubeconform: every object becomes a typed object literal in a
// generated TypeScript file (kubernetes-models' interfaces, generated from the upstream OpenAPI),
// and tsc's excess-property check rejects any field the API does not have, at any depth.
import { spawnSync } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { join, resolve } from 'path';
import type { K8sObject } from './kustomize';

const ROOT = resolve(__dirname, '../../..');

export function strictFieldErrors(objs: K8sObject[]): string[] {
  const dir = mkdtempSync(join(ROOT, '.tmp', 'k8s-strict-'));
  try {
    const lines: string[] = [];
    objs.forEach((o, i) => {
      const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
      // the Prometheus Operator's kinds (ServiceMonitor, PodMonitor, PrometheusRule) from its models
      const mod =
        group === 'monitoring.coreos.com'
          ? `@kubernetes-models/prometheus-operator/${group}/${version}`
          : `kubernetes-models/${group ? `${group}/` : ''}${version}/${o.kind}`;
      lines.push(`import type { I${o.kind} as T${i} } from '${mod}';`);
      lines.push(`export const o${i}: T${i} = ${JSON.stringify(o, null, 2)};`);
    });
    const file = join(dir, 'manifests.ts');
    writeFileSync(file, lines.join('\n') + '\n');
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const r = spawnSync(
      process.execPath,
      [tsc, '--noEmit', '--strict', '--skipLibCheck', '--moduleResolution', 'node', '--module', 'commonjs', '--target', 'es2022', '--types', 'node', file],
      { cwd: ROOT, encoding: 'utf8' },
    );
    if (r.status === 0) return [];
    return (r.stdout + r.stderr)
      .split('\n')
      .filter((l) => l.includes('error TS'))
      .map((l) => l.replace(file, 'manifests.ts'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
