// Agent configuration: environment, flags over environment, and clear errors for bad values.
import { hostname } from 'os';
import { InvalidClusterNameError } from '@cmesh/protocol';
import { loadConfig } from '../src/config';

describe('agent config', () => {
  it('reads the environment and lets flags override it', () => {
    const c = loadConfig(['--name', 'gpu-3', '--device=3', '--data-ports', '29500-29510'], {
      NATS_URL: 'nats://n:4222',
      CMESH_AGENT_NAME: 'x',
      CMESH_HTTP_PORT: '9100',
    });
    expect(c).toMatchObject({
      natsUrl: 'nats://n:4222',
      name: 'gpu-3',
      agentId: 'gpu-3',
      deviceIndex: 3,
      dataPorts: [29500, 29510],
      httpPort: 9100,
      ncclEnabled: true,
    });
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_AGENT_ID: 'id-7', CMESH_NCCL: '0' })).toMatchObject({
      agentId: 'id-7',
      name: 'a',
      ncclEnabled: false,
      dataPorts: [0, 0],
    });
  });

  it('names what is wrong', () => {
    expect(() => loadConfig(['--bogus', '1'], {})).toThrow('unknown flag --bogus');
    expect(() => loadConfig(['--name'], {})).toThrow('--name needs a value');
    expect(() => loadConfig([], { CMESH_DEVICE_INDEX: '-1' })).toThrow('CMESH_DEVICE_INDEX (--device): must be an integer in [0, 65536], got "-1"');
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a b' })).toThrow('CMESH_AGENT_NAME (--name): letters, digits, _ and - only (1..64), got "a b"');
    const ports = (v: string) => loadConfig(['--data-ports', v], { CMESH_AGENT_NAME: 'a' }).dataPorts;
    expect(() => ports('10-5')).toThrow('CMESH_DATA_PORTS (--data-ports): 5 < 10, got "10-5"');
    expect(() => ports('x')).toThrow('CMESH_DATA_PORTS (--data-ports): must be "lo-hi" or "port", got "x"');
    expect(() => ports('1-70000')).toThrow('ports are at most 65535');
    expect(ports('4000')).toEqual([4000, 4000]);
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NCCL: 'yes' })).toThrow('CMESH_NCCL (--nccl): must be 0 or 1, got "yes"');
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NCCL_SOCKET: '' }).ncclSocket).toBeUndefined();
  });
});

describe('agent config: the device', () => {
  it('takes CMESH_DEVICE_INDEX, else LOCAL_RANK, else 0 marked as not named', () => {
    expect(loadConfig(['--device', '2'], { CMESH_AGENT_NAME: 'a', LOCAL_RANK: '5' })).toMatchObject({ deviceIndex: 2, deviceNamed: true });
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', LOCAL_RANK: '5' })).toMatchObject({ deviceIndex: 5, deviceNamed: true });
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', LOCAL_RANK: '' })).toMatchObject({ deviceIndex: 0, deviceNamed: false });
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a' })).toMatchObject({ deviceIndex: 0, deviceNamed: false });
    expect(loadConfig([], { LOCAL_RANK: '3' }).name).toMatch(/-3$/);
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a', LOCAL_RANK: 'x' })).toThrow(
      'LOCAL_RANK must be an integer in [0, 65536] to pick the GPU, got "x"; set CMESH_DEVICE_INDEX (--device)',
    );
  });
});

describe('agent config: the node', () => {
  it('takes CMESH_NODE_NAME or --node-name, else the host name; refuses a name that is no host or node name', () => {
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: 'gpu-node-7.dc1' }).nodeName).toBe('gpu-node-7.dc1');
    expect(loadConfig(['--node-name', 'n2'], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: 'n1' }).nodeName).toBe('n2');
    // empty, as a manifest that lists the variable without a value: the host name
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: '' }).nodeName).toBe(hostname());
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: 'a b' })).toThrow('node name "a b"');
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: '-x' })).toThrow('CMESH_NODE_NAME');
    expect(() => loadConfig([], { CMESH_AGENT_NAME: 'a', CMESH_NODE_NAME: 'x'.repeat(254) })).toThrow('CMESH_NODE_NAME');
  });
});

describe('agent config: cluster', () => {
  it('takes the cluster from CMESH_CLUSTER or --cluster and refuses a bad name with a typed error', () => {
    expect(loadConfig([], { CMESH_AGENT_NAME: 'a' }).cluster).toBe('default');
    expect(loadConfig(['--cluster', 'lab'], { CMESH_AGENT_NAME: 'a', CMESH_CLUSTER: 'other' }).cluster).toBe('lab');
    expect(() => loadConfig(['--cluster', 'a.b'], { CMESH_AGENT_NAME: 'a' })).toThrow(InvalidClusterNameError);
  });
});
