// `cmesh secrets`: the secrets of a deployment with authentication on.
//   cmesh secrets init DIR   makes them where missing (compose's auth-init service runs it on the
//                            secrets volume at every start): the API token, NATS passwords for the
//                            coordinator, the agents (one shared login) and clients, and the
//                            nats-server configuration with each role's permissions
//   cmesh secrets k8s        prints a Kubernetes Secret with fresh values for k8s/base
// Values are never printed, except into the Secret manifest, which is written to stdout for
// kubectl (`cmesh secrets k8s | kubectl apply -f -`).
import { randomBytes } from 'crypto';
import { Command } from 'commander';
import { checkClusterName } from '@cmesh/protocol';
import { prepareMeshAuth } from '../mesh/mesh-auth';

/** The keys of the Secret `cmesh-auth` that k8s/base reads. */
export const K8S_SECRET_KEYS = ['api-token', 'nats-coordinator-password', 'nats-agent-password', 'nats-client-password'] as const;

export function k8sSecret(name: string, namespace: string): string {
  const data = K8S_SECRET_KEYS.map((k) => `  ${k}: ${randomBytes(32).toString('base64url')}`).join('\n');
  return `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n  labels:\n    app.kubernetes.io/part-of: cmesh\ntype: Opaque\nstringData:\n${data}\n`;
}

export function register(program: Command): void {
  const cmd = program.command('secrets').description('secrets of a deployment with authentication on (compose, Kubernetes)');
  cmd
    .command('init <dir>')
    .description('make the API token, the NATS passwords and the nats-server configuration in DIR where missing (existing files are kept)')
    .option('--cluster <name>', 'cluster whose subjects the permissions name', 'default')
    .action((dir: string, o: { cluster: string }) => {
      const auth = prepareMeshAuth(dir, [], o.cluster === 'default' ? undefined : checkClusterName(o.cluster));
      process.stdout.write(`cmesh secrets: ${auth.stateDir}: api-token, nats/{coordinator,agent,client}.password, ${auth.natsConf}\n`);
    });
  cmd
    .command('k8s')
    .description('print a Kubernetes Secret with fresh random values for k8s/base: cmesh secrets k8s | kubectl apply -f -')
    .option('--name <name>', 'Secret name', 'cmesh-auth')
    .option('--namespace <ns>', 'namespace', 'cmesh')
    .action((o: { name: string; namespace: string }) => {
      process.stdout.write(k8sSecret(o.name, o.namespace));
    });
}
