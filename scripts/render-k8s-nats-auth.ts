// Rewrites the `auth.conf` of k8s/base/nats.yaml (the nats ConfigMap) from natsAuthorization() of
// @cmesh/protocol: run it after a change to the roles' permissions or the cluster's subjects.
//   node -r @swc-node/register scripts/render-k8s-nats-auth.ts
// test/deploy/k8s.test.ts fails while the two differ.
import { readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import { clusterNames, DEPLOYMENT_NATS_USERS, natsAuthorization } from '../libs/protocol/src';

const file = join(__dirname, '../k8s/base/nats.yaml');
const yaml = readFileSync(file, 'utf8');
const conf = natsAuthorization(DEPLOYMENT_NATS_USERS, clusterNames());
const indented = conf
  .trimEnd()
  .split('\n')
  .map((l) => (l ? `    ${l}` : ''))
  .join('\n');
// the block scalar runs from `auth.conf: |` to the first line indented less than its content
const next = yaml.replace(/( {2}auth\.conf: \|\n)(?: {4}.*\n|\n)*/, (_m, head: string) => `${head}${indented}\n`);
if (next === yaml && !yaml.includes(indented)) throw new Error(`no auth.conf block found in ${file}`);
writeFileSync(file, next);
process.stdout.write(`${file}: auth.conf rendered (${conf.split('\n').length} lines)\n`);
