import { InvalidClusterNameError } from '@cmesh/protocol';
import { hostname } from 'os';
import { loadCoordinatorConfig } from './coordinator-config';

describe('coordinator config', () => {
  it('defaults: the default cluster, port 7700, one replica id of host and pid', () => {
    expect(loadCoordinatorConfig([], {})).toMatchObject({ cluster: 'default', httpPort: 7700, replicaId: `${hostname()}-${process.pid}` });
  });

  it('takes the cluster and the replica id from the environment, flags over it', () => {
    expect(loadCoordinatorConfig(['--cluster', 'lab'], { CMESH_CLUSTER: 'other', CMESH_REPLICA_ID: 'pod-1' })).toMatchObject({
      cluster: 'lab',
      replicaId: 'pod-1',
    });
  });

  it('scheduled scans on tcp unless CMESH_SCAN_BACKEND (--scan-backend) names nccl; another name is refused, naming the variable', () => {
    expect(loadCoordinatorConfig([], {}).scanBackend).toBe('tcp');
    expect(loadCoordinatorConfig([], { CMESH_SCAN_BACKEND: 'nccl' }).scanBackend).toBe('nccl');
    expect(loadCoordinatorConfig(['--scan-backend', 'tcp'], { CMESH_SCAN_BACKEND: 'nccl' }).scanBackend).toBe('tcp');
    expect(() => loadCoordinatorConfig([], { CMESH_SCAN_BACKEND: 'gloo' })).toThrow(/CMESH_SCAN_BACKEND \(--scan-backend\)/);
  });

  it('refuses a cluster name that is not a NATS token (typed) and a replica id that is not a KV key', () => {
    expect(() => loadCoordinatorConfig([], { CMESH_CLUSTER: 'a.b' })).toThrow(InvalidClusterNameError);
    expect(() => loadCoordinatorConfig([], { CMESH_CLUSTER: 'jobs' })).toThrow(/reserved/);
    expect(() => loadCoordinatorConfig([], { CMESH_REPLICA_ID: 'a b' })).toThrow(
      'CMESH_REPLICA_ID (--replica-id): letters, digits, _ . and - only (1..128), got "a b"',
    );
  });
});
