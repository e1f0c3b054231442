// The node mode's plan: one agent per device with its own name, device, ports, login and socket;
// what would make agents of one node collide is refused, naming it.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { nodeAgentName, nodeAgentNames } from '@cmesh/protocol';
import { loadConfig } from '../config';
import { nodePlan, takeDevicesFlag, visibleDevices } from './node-plan';

const K8S_ENV = {
  CMESH_NODE_NAME: 'ip-10-0-3-7.ec2.internal',
  CMESH_AGENT_NAME: 'ip-10-0-3-7.ec2.internal',
  CMESH_HTTP_PORT: '9400',
  CMESH_METRICS_PORT: '9500',
  CMESH_DATA_PORTS: '29500-29599',
  CMESH_NCCL_SOCKET: '/var/run/cmesh/nccl-{device}.sock',
  NATS_PASSWORD_FILE: '/etc/cmesh/auth/nats-password-{agent}',
};

describe('node mode plan', () => {
  it('gives each device its own agent: name, device, LOCAL_RANK, ports, socket, NATS login', () => {
    const plan = nodePlan('8', ['--nats', 'nats://nats:4222'], K8S_ENV);
    expect(plan.agents).toHaveLength(8);
    const names = plan.agents.map((a) => a.name);
    expect(new Set(names).size).toBe(8);
    expect(names[3]).toBe('ip-10-0-3-7_ec2_internal-gpu3');
    expect(plan.agents[3].env).toEqual({
      CMESH_AGENT_NAME: 'ip-10-0-3-7_ec2_internal-gpu3',
      CMESH_DEVICE_INDEX: '3',
      LOCAL_RANK: '3',
      LOCAL_WORLD_SIZE: '8',
      CMESH_HTTP_PORT: '9403',
      CMESH_METRICS_PORT: '9503',
      CMESH_NCCL_SOCKET: '/var/run/cmesh/nccl-3.sock',
      NATS_USER: 'ip-10-0-3-7_ec2_internal-gpu3',
      NATS_PASSWORD_FILE: '/etc/cmesh/auth/nats-password-ip-10-0-3-7_ec2_internal-gpu3',
    });
    expect(plan.argv).toEqual(['--nats', 'nats://nats:4222']);
    // what each agent then reads is a valid configuration of its own device
    for (const a of plan.agents) {
      const c = loadConfig(plan.argv, { ...K8S_ENV, ...a.env });
      expect([c.name, c.agentId, c.deviceIndex, c.deviceNamed, c.httpPort, c.ncclSocket]).toEqual([
        a.name,
        a.name,
        a.device,
        true,
        9400 + a.device,
        `/var/run/cmesh/nccl-${a.device}.sock`,
      ]);
    }
    // `cmesh secrets k8s --gpu-nodes` makes the logins of exactly these names
    expect(names).toEqual(nodeAgentNames([K8S_ENV.CMESH_NODE_NAME], 8));
  });

  it('port 0 stays any free port; without a node name the host name; no socket or login when none is set', () => {
    const plan = nodePlan('2', [], { CMESH_HTTP_PORT: '0' });
    expect(plan.agents.map((a) => a.env.CMESH_HTTP_PORT)).toEqual(['0', '0']);
    expect(plan.agents[0].env.NATS_USER).toBeUndefined();
    expect(plan.agents[0].env.CMESH_NCCL_SOCKET).toBeUndefined();
    expect(plan.agents[1].env.CMESH_NODE_NAME).toBe(plan.node);
  });

  it('refuses what would make agents of the node collide, naming it', () => {
    expect(() => nodePlan('2', [], { CMESH_NCCL_SOCKET: '/var/run/cmesh/nccl.sock' })).toThrow(
      /2 agents would share one sidecar; name one socket per device with \{device\}/,
    );
    // one agent on one socket is fine
    expect(nodePlan('1', [], { CMESH_NCCL_SOCKET: '/s.sock' }).agents[0].env.CMESH_NCCL_SOCKET).toBe('/s.sock');
    expect(() => nodePlan('2', [], { NATS_USER: 'rank-agent-0', NATS_PASSWORD_FILE: '/etc/cmesh/auth/nats-password-rank-agent-0' })).toThrow(
      /name its file with \{agent\}/,
    );
    expect(() => nodePlan('2', [], { NATS_USER: 'u' })).toThrow(/one login for several agents/);
    expect(() => nodePlan('2', [], { NATS_PASSWORD: 'x'.repeat(40) })).toThrow(/one password for several agents/);
    for (const flag of ['--name', '--device', '--http-port', '--nccl-socket', '--id'])
      expect(() => nodePlan('2', [flag, '1'], {})).toThrow(`${flag} names one agent`);
    expect(() => nodePlan('2', [], { CMESH_DEVICE_INDEX: '1' })).toThrow(/CMESH_DEVICE_INDEX=1 names one agent/);
    expect(() => nodePlan('2', [], { LOCAL_RANK: '0' })).toThrow(/LOCAL_RANK=0 names one agent/);
    expect(() => nodePlan('0', [], {})).toThrow(/--devices must be all or a count in \[1, 64\], got "0"/);
    expect(() => nodePlan('eight', [], {})).toThrow(/got "eight"/);
    expect(() => nodePlan('2', [], { CMESH_HTTP_PORT: '65535' })).toThrow(/CMESH_HTTP_PORT 65535 \+ device 1 is past 65535/);
  });

  it('--devices all counts the devices this process sees', () => {
    const dev = mkdtempSync(join(tmpdir(), 'cmesh-dev-'));
    try {
      for (const f of ['nvidia0', 'nvidia1', 'nvidia2', 'nvidiactl', 'nvidia-uvm']) writeFileSync(join(dev, f), '');
      mkdirSync(join(dev, 'nvidia-caps'));
      expect(visibleDevices({}, dev)).toBe(3);
      expect(visibleDevices({ CUDA_VISIBLE_DEVICES: '4,5' }, dev)).toBe(2);
      expect(visibleDevices({ NVIDIA_VISIBLE_DEVICES: 'all' }, dev)).toBe(3);
      expect(visibleDevices({ NVIDIA_VISIBLE_DEVICES: 'GPU-aaa,GPU-bbb,GPU-ccc,GPU-ddd' }, dev)).toBe(4);
      expect(nodePlan('all', [], {}, dev).agents).toHaveLength(3);
      expect(() => nodePlan('all', [], {}, join(dev, 'nvidia-caps'))).toThrow(/--devices all: no GPU visible/);
    } finally {
      rmSync(dev, { recursive: true, force: true });
    }
  });

  it('takes --devices out of argv, in either form', () => {
    expect(takeDevicesFlag(['--nats', 'n', '--devices', '4'])).toEqual({ devices: '4', rest: ['--nats', 'n'] });
    expect(takeDevicesFlag(['--devices=all', '--cluster', 'c'])).toEqual({ devices: 'all', rest: ['--cluster', 'c'] });
    expect(takeDevicesFlag(['--name', 'a'])).toEqual({ devices: undefined, rest: ['--name', 'a'] });
    expect(() => takeDevicesFlag(['--devices'])).toThrow(/--devices needs a value/);
  });
});

describe('nodeAgentName', () => {
  it('is a valid agent name (NATS token, 64 characters at most) for any Kubernetes node name, distinct per node and device', () => {
    expect(nodeAgentName('gpu-node-1', 0)).toBe('gpu-node-1-gpu0');
    const long = (tail: string) => 'a'.repeat(200) + '.' + tail;
    const [a, b] = [nodeAgentName(long('x.example'), 7), nodeAgentName(long('y.example'), 7)];
    for (const n of [a, b]) expect(n).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(a).not.toBe(b);
    expect(a.endsWith('-gpu7')).toBe(true);
    expect(() => nodeAgentName('', 0)).toThrow(/node name is empty/);
    expect(nodeAgentNames(['n1', 'n2'], 2)).toEqual(['n1-gpu0', 'n1-gpu1', 'n2-gpu0', 'n2-gpu1']);
  });
});
