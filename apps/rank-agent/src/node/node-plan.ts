// The node mode's plan (`--devices all|N`, CMESH_DEVICES): one agent process per device of the
// node, each with its own name (`<node>-gpu<i>`, nodeAgentName), device (CMESH_DEVICE_INDEX and
// LOCAL_RANK), ports, NATS login and sidecar socket. The agents of one pod share its network
// namespace, so ports that one agent would take whole are spread: HTTP and job metrics at
// base + i; the data-plane range is shared (each listener takes the first free port of it).
import { readdirSync } from 'fs';
import { hostname } from 'os';
import { nodeAgentName } from '@cmesh/protocol';

/** Placeholders in CMESH_NCCL_SOCKET and NATS_PASSWORD_FILE that the node mode fills per agent. */
const DEVICE_PLACEHOLDER = '{device}';
const AGENT_PLACEHOLDER = '{agent}';
const MAX_DEVICES = 64;

/** Flags that name one agent: in node mode the supervisor sets them per device. */
const PER_AGENT_FLAGS = ['--name', '--id', '--device', '--http-port', '--nccl-socket'];

/** The node mode's lines of `--help`. */
export const NODE_MODE_HELP = [
  'Node mode: --devices <all|N> (CMESH_DEVICES) starts and supervises one agent per device:',
  `  named <CMESH_AGENT_NAME or CMESH_NODE_NAME or hostname>-gpu<i>, CMESH_DEVICE_INDEX = LOCAL_RANK = i,`,
  `  HTTP and job-metrics ports base + i, ${DEVICE_PLACEHOLDER} in CMESH_NCCL_SOCKET and ${AGENT_PLACEHOLDER} in NATS_PASSWORD_FILE filled per agent.`,
  '',
].join('\n');

export class NodeModeError extends Error {
  override name = 'NodeModeError';
}

export interface NodeAgent {
  name: string;
  device: number;
  env: Record<string, string>;
}

export interface NodePlan {
  node: string;
  agents: NodeAgent[];
  /** the argv every agent gets (the caller's, without --devices) */
  argv: string[];
}

/** `--devices N` / `--devices=N` taken out of argv; undefined when absent (CMESH_DEVICES may still say). */
export function takeDevicesFlag(argv: readonly string[]): { devices?: string; rest: string[] } {
  const rest: string[] = [];
  let devices: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    if (flag !== '--devices') {
      rest.push(argv[i]);
      continue;
    }
    devices = inline ?? argv[++i];
    if (devices === undefined) throw new NodeModeError('--devices needs a value: all, or a count');
  }
  return { devices, rest };
}

/**
 * The devices this process sees, for `--devices all`: CUDA_VISIBLE_DEVICES or
 * NVIDIA_VISIBLE_DEVICES when they list them, else the /dev/nvidia<N> nodes (what the NVIDIA
 * container runtime mounts for the GPUs a container was given).
 */
export function visibleDevices(env: NodeJS.ProcessEnv, devDir = '/dev'): number {
  for (const v of ['CUDA_VISIBLE_DEVICES', 'NVIDIA_VISIBLE_DEVICES']) {
    const list = env[v]?.trim();
    if (!list || list === 'all' || list === 'void' || list === 'none') continue;
    return list.split(',').filter((d) => d.trim() !== '').length;
  }
  try {
    return readdirSync(devDir).filter((f) => /^nvidia\d+$/.test(f)).length;
  } catch {
    return 0;
  }
}

function deviceCount(text: string, env: NodeJS.ProcessEnv, devDir?: string): number {
  if (text.trim() === 'all') {
    const n = visibleDevices(env, devDir);
    if (n === 0)
      throw new NodeModeError('--devices all: no GPU visible (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, /dev/nvidia<N>); give the count (--devices N)');
    return Math.min(n, MAX_DEVICES);
  }
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1 || n > MAX_DEVICES)
    throw new NodeModeError(`--devices must be all or a count in [1, ${MAX_DEVICES}], got ${JSON.stringify(text)}`);
  return n;
}

function portPlus(name: string, raw: string | undefined, i: number): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  const base = Number(raw);
  if (!/^\d+$/.test(raw) || base > 65535) throw new NodeModeError(`${name} must be a port, got ${JSON.stringify(raw)}`);
  // 0 asks for any free port, which every agent may ask for
  if (base === 0) return '0';
  if (base + i > 65535) throw new NodeModeError(`${name} ${base} + device ${i} is past 65535`);
  return String(base + i);
}

/**
 * What each agent of the node gets. Refuses what would make the agents collide: a flag that names
 * one agent, one NATS login or one sidecar socket for several of them.
 */
export function nodePlan(devicesText: string, argv: readonly string[], env: NodeJS.ProcessEnv, devDir?: string): NodePlan {
  const n = deviceCount(devicesText, env, devDir);
  for (const a of argv) {
    const flag = a.split('=', 2)[0];
    if (PER_AGENT_FLAGS.includes(flag))
      throw new NodeModeError(`${flag} names one agent; with --devices each agent's is set per device (the name prefix: CMESH_NODE_NAME or CMESH_AGENT_NAME)`);
  }
  for (const v of ['CMESH_DEVICE_INDEX', 'LOCAL_RANK', 'CMESH_AGENT_ID']) {
    if (env[v]) throw new NodeModeError(`${v}=${env[v]} names one agent; with --devices each agent's is set per device`);
  }
  const node = env.CMESH_AGENT_NAME || env.CMESH_NODE_NAME || hostname();
  const socket = env.CMESH_NCCL_SOCKET || undefined;
  if (socket && n > 1 && !socket.includes(DEVICE_PLACEHOLDER))
    throw new NodeModeError(
      `CMESH_NCCL_SOCKET ${socket}: ${n} agents would share one sidecar; name one socket per device with ${DEVICE_PLACEHOLDER} (e.g. /var/run/cmesh/nccl-${DEVICE_PLACEHOLDER}.sock)`,
    );
  const passFile = env.NATS_PASSWORD_FILE || undefined;
  if (env.NATS_PASSWORD)
    throw new NodeModeError('NATS_PASSWORD: one password for several agents; each agent logs in as itself: NATS_PASSWORD_FILE with {agent} in it');
  if (passFile && !passFile.includes(AGENT_PLACEHOLDER))
    throw new NodeModeError(
      `NATS_PASSWORD_FILE ${passFile}: each agent logs in as itself (its name is its NATS user); name its file with ${AGENT_PLACEHOLDER} (e.g. /etc/cmesh/auth/nats-password-${AGENT_PLACEHOLDER})`,
    );
  if (env.NATS_USER && !passFile)
    throw new NodeModeError(
      `NATS_USER=${env.NATS_USER}: one login for several agents; each agent logs in as itself: NATS_PASSWORD_FILE with ${AGENT_PLACEHOLDER} in it`,
    );
  const agents = Array.from({ length: n }, (_, device): NodeAgent => {
    const name = nodeAgentName(node, device);
    const e: Record<string, string> = {
      CMESH_AGENT_NAME: name,
      CMESH_DEVICE_INDEX: String(device),
      // torchrun's names: the rank on this node and how many the node has
      LOCAL_RANK: String(device),
      LOCAL_WORLD_SIZE: String(n),
    };
    if (!env.CMESH_NODE_NAME) e.CMESH_NODE_NAME = node;
    const http = portPlus('CMESH_HTTP_PORT', env.CMESH_HTTP_PORT, device);
    if (http !== undefined) e.CMESH_HTTP_PORT = http;
    const metrics = portPlus('CMESH_METRICS_PORT', env.CMESH_METRICS_PORT, device);
    if (metrics !== undefined) e.CMESH_METRICS_PORT = metrics;
    if (socket) e.CMESH_NCCL_SOCKET = socket.split(DEVICE_PLACEHOLDER).join(String(device));
    if (passFile) {
      e.NATS_USER = name;
      e.NATS_PASSWORD_FILE = passFile.split(AGENT_PLACEHOLDER).join(name);
    }
    return { name, device, env: e };
  });
  return { node, agents, argv: [...argv] };
}
