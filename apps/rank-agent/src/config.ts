// Agent configuration: environment first, flags override (`--name a0 --device 1 ...`).
import { hostname } from 'os';
import { DEFAULT_CLUSTER, checkClusterName } from '@cmesh/protocol';

export interface AgentConfig {
  natsUrl: string;
  /** the cluster whose subjects the agent uses (clusterNames of @cmesh/protocol) */
  cluster: string;
  /** stable id: the name unless CMESH_AGENT_ID says otherwise */
  agentId: string;
  name: string;
  host: string;
  /** GPU index for the nccl backend; the CPU slot number otherwise */
  deviceIndex: number;
  /** data-plane port range [lo, hi] (0,0: any free port) */
  dataPorts: [number, number];
  /** HTTP port for /health and /metrics (0: any free port) */
  httpPort: number;
  /** where the agent listens for HTTP and the data plane */
  bindHost: string;
  heartbeatMs: number;
  /** attach to a running nccl sidecar instead of spawning one */
  ncclSocket?: string;
  /** try the nccl backend at all (spawning the sidecar); off with CMESH_NCCL=0 */
  ncclEnabled: boolean;
}

const FLAGS: Record<string, string> = {
  '--nats': 'NATS_URL',
  '--cluster': 'CMESH_CLUSTER',
  '--name': 'CMESH_AGENT_NAME',
  '--id': 'CMESH_AGENT_ID',
  '--device': 'CMESH_DEVICE_INDEX',
  '--data-ports': 'CMESH_DATA_PORTS',
  '--http-port': 'CMESH_HTTP_PORT',
  '--host': 'CMESH_AGENT_HOST',
  '--heartbeat-ms': 'CMESH_HEARTBEAT_MS',
  '--nccl-socket': 'CMESH_NCCL_SOCKET',
  '--nccl': 'CMESH_NCCL',
};

function int(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return n;
}

export function parsePortRange(text: string): [number, number] {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text.trim());
  if (!m) throw new RangeError(`CMESH_DATA_PORTS must be "lo-hi" or "port", got ${JSON.stringify(text)}`);
  const lo = int('data port', m[1], 0, 65535);
  const hi = m[2] === undefined ? lo : int('data port', m[2], 0, 65535);
  if (hi < lo) throw new RangeError(`CMESH_DATA_PORTS: ${hi} < ${lo}`);
  return [lo, hi];
}

export function loadConfig(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const e: Record<string, string | undefined> = { ...env };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const key = FLAGS[flag];
    if (!key) throw new RangeError(`unknown flag ${flag}; known: ${Object.keys(FLAGS).join(' ')}`);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new RangeError(`${flag} needs a value`);
    e[key] = value;
  }
  const deviceIndex = int('CMESH_DEVICE_INDEX', e.CMESH_DEVICE_INDEX ?? '0', 0, 1 << 16);
  const name = e.CMESH_AGENT_NAME ?? `${hostname()}-${deviceIndex}`;
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw new RangeError(`agent name ${JSON.stringify(name)}: letters, digits, _ and - only`);
  return {
    natsUrl: e.NATS_URL ?? 'nats://127.0.0.1:4222',
    cluster: checkClusterName(e.CMESH_CLUSTER ?? DEFAULT_CLUSTER),
    agentId: e.CMESH_AGENT_ID ?? name,
    name,
    host: e.CMESH_AGENT_HOST ?? '127.0.0.1',
    bindHost: e.CMESH_AGENT_HOST ?? '127.0.0.1',
    deviceIndex,
    dataPorts: parsePortRange(e.CMESH_DATA_PORTS ?? '0'),
    httpPort: int('CMESH_HTTP_PORT', e.CMESH_HTTP_PORT ?? '0', 0, 65535),
    heartbeatMs: int('CMESH_HEARTBEAT_MS', e.CMESH_HEARTBEAT_MS ?? '1000', 50, 600_000),
    ncclSocket: e.CMESH_NCCL_SOCKET || undefined,
    ncclEnabled: (e.CMESH_NCCL ?? '1') !== '0',
  };
}

export const AGENT_CONFIG = Symbol('AGENT_CONFIG');
