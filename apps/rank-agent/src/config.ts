// Agent configuration: ONE schema (AgentSettings) holds every setting's variable, flag, default
// and help; the environment is read first and flags override it (`--name a0 --device 1 ...`), and
// `--help` prints the same table. A few values follow from others (agentConfig()).
import { hostname } from 'os';
import { z } from 'zod';
import { DEFAULT_CLUSTER, NodeNameSchema, checkClusterName } from '@cmesh/protocol';
import { intSetting, loadSettings, setting, settingsHelp } from '@cmesh/protocol/kit';

/** "lo-hi" or one port; "0" (or "0-0") is any free port. A string says what is wrong. */
function portRange(text: string): [number, number] | string {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text.trim());
  if (!m) return 'must be "lo-hi" or "port"';
  const [lo, hi] = [Number(m[1]), Number(m[2] ?? m[1])];
  if (lo > 65535 || hi > 65535) return 'ports are at most 65535';
  if (hi < lo) return `${hi} < ${lo}`;
  return [lo, hi];
}

/** An empty variable counts as unset (a manifest that lists it without a value). */
const unsetIfEmpty = (v: unknown) => (v === '' ? undefined : v);
const agentName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - only (1..64)');

export const AgentSettings = z.object({
  natsUrl: setting(z.string().min(1).default('nats://127.0.0.1:4222'), {
    env: 'NATS_URL',
    flag: '--nats',
    help: 'NATS server of the cluster; several comma-separated',
  }),
  /** replicas of a store bucket its job workers make themselves (only where no coordinator answers) */
  natsReplicas: setting(intSetting(1, 5).optional(), {
    env: 'CMESH_NATS_REPLICAS',
    flag: '--nats-replicas',
    help: "replicas of a store bucket the agent's workers make where no coordinator makes it",
    defaultText: 'min(3, JetStream servers in the cluster)',
  }),
  cluster: setting(
    // a bad name throws checkClusterName's typed InvalidClusterNameError
    z
      .string()
      .default(DEFAULT_CLUSTER)
      .transform((c) => checkClusterName(c)),
    { env: 'CMESH_CLUSTER', flag: '--cluster', help: "the coordinator's cluster: the agent uses that cluster's subjects only" },
  ),
  name: setting(agentName.optional(), { env: 'CMESH_AGENT_NAME', flag: '--name', help: 'agent name', defaultText: '<hostname>-<device index>' }),
  agentId: setting(z.string().min(1).optional(), {
    env: 'CMESH_AGENT_ID',
    flag: '--id',
    help: 'stable id the coordinator keys the agent by',
    defaultText: 'the name',
  }),
  /** the node the agent runs on: placement packs a job's ranks node by node, scans tell intra-node links apart */
  nodeName: setting(z.preprocess(unsetIfEmpty, NodeNameSchema.optional()), {
    env: 'CMESH_NODE_NAME',
    flag: '--node-name',
    help: "the node (machine) the agent runs on; agents with the same node share its GPUs' NVLink and its memory (Kubernetes: spec.nodeName)",
    defaultText: 'the host name',
  }),
  /** GPU index for the nccl backend; the CPU slot number otherwise */
  deviceIndex: setting(intSetting(0, 1 << 16).optional(), {
    env: 'CMESH_DEVICE_INDEX',
    flag: '--device',
    help: 'GPU index for the nccl backend; the slot number otherwise',
    defaultText: 'LOCAL_RANK, else 0 (refused on a host with several GPUs)',
  }),
  /** where the agent listens for HTTP and the data plane, and what it advertises to peers */
  host: setting(z.string().min(1).default('127.0.0.1'), {
    env: 'CMESH_AGENT_HOST',
    flag: '--host',
    help: 'address the agent listens on and advertises to peers',
  }),
  /** HTTP port for /health and /metrics (0: any free port) */
  httpPort: setting(intSetting(0, 65535).default(0), { env: 'CMESH_HTTP_PORT', flag: '--http-port', help: '/health and /metrics port (0: any free port)' }),
  /** data-plane port range [lo, hi] (0,0: any free port) */
  dataPorts: setting(
    z
      .string()
      .default('0')
      .transform((t, ctx) => {
        const r = portRange(t);
        if (typeof r !== 'string') return r;
        ctx.addIssue({ code: 'custom', message: r });
        return z.NEVER;
      }),
    { env: 'CMESH_DATA_PORTS', flag: '--data-ports', help: 'data-plane port range lo-hi, or one port (0: any free port)', defaultText: '0' },
  ),
  heartbeatMs: setting(intSetting(50, 600_000).default(1000), {
    env: 'CMESH_HEARTBEAT_MS',
    flag: '--heartbeat-ms',
    help: 'heartbeat interval until the coordinator answers with its own, ms',
  }),
  /** what one job worker may use; a job whose buffers need more is failed before it starts */
  jobMemoryBytes: setting(intSetting(64 * 2 ** 20, 2 ** 50).optional(), {
    env: 'CMESH_JOB_MEMORY_BYTES',
    flag: '--job-memory-bytes',
    help: "memory a job's worker may use (bytes); a larger job fails naming this agent",
    defaultText: "the host's memory or the cgroup's limit",
  }),
  /** attach to a running nccl sidecar instead of spawning one */
  ncclSocket: setting(z.preprocess(unsetIfEmpty, z.string().optional()), {
    env: 'CMESH_NCCL_SOCKET',
    flag: '--nccl-socket',
    help: 'attach to a running nccl sidecar on this Unix socket',
    defaultText: 'spawn one',
  }),
  /** try the nccl backend at all (spawning the sidecar); off with CMESH_NCCL=0 */
  ncclEnabled: setting(
    z
      .enum(['0', '1'], { error: 'must be 0 or 1' })
      .default('1')
      .transform((v) => v === '1'),
    { env: 'CMESH_NCCL', flag: '--nccl', help: '0 turns the nccl backend off (no sidecar)', defaultText: '1' },
  ),
});

type Parsed = z.output<typeof AgentSettings>;
export type AgentConfig = Omit<Parsed, 'name' | 'agentId' | 'deviceIndex' | 'nodeName'> & {
  name: string;
  /** CMESH_NODE_NAME (--node-name), else the host name */
  nodeName: string;
  /** CMESH_DEVICE_INDEX (--device), else LOCAL_RANK (one agent per GPU, as torchrun numbers them), else 0 */
  deviceIndex: number;
  /** false when neither named the device: the nccl backend then refuses a host with several GPUs */
  deviceNamed: boolean;
  /** stable id: the name unless CMESH_AGENT_ID says otherwise; with a NATS login, that login's user */
  agentId: string;
  /** where the agent listens for HTTP and the data plane (the host) */
  bindHost: string;
};

export function loadConfig(argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const s = loadSettings(AgentSettings, argv, env);
  const localRank = env.LOCAL_RANK === undefined || env.LOCAL_RANK === '' ? undefined : Number(env.LOCAL_RANK);
  if (localRank !== undefined && !(Number.isInteger(localRank) && localRank >= 0 && localRank <= 1 << 16))
    throw new RangeError(
      `LOCAL_RANK must be an integer in [0, 65536] to pick the GPU, got ${JSON.stringify(env.LOCAL_RANK)}; set CMESH_DEVICE_INDEX (--device)`,
    );
  const named = s.deviceIndex ?? localRank;
  const deviceIndex = named ?? 0;
  // the default name is checked like a given one (a host name may hold other characters)
  const name = s.name ?? `${hostname()}-${deviceIndex}`;
  const checked = agentName.safeParse(name);
  if (!checked.success) throw new RangeError(`agent name ${JSON.stringify(name)}: ${checked.error.issues[0].message}; set CMESH_AGENT_NAME (--name)`);
  const nodeName = s.nodeName ?? hostname();
  const node = NodeNameSchema.safeParse(nodeName);
  if (!node.success) throw new RangeError(`${node.error.issues[0].message}; set CMESH_NODE_NAME (--node-name)`);
  const agentId = s.agentId ?? name;
  // the coordinator knows an agent by the subjects its login may publish on (agents.register.<user>)
  const user = env.NATS_USER;
  if (user && user !== agentId)
    throw new RangeError(
      `agent id ${JSON.stringify(agentId)} is not its NATS login ${JSON.stringify(user)}: an agent's id is its NATS user; set CMESH_AGENT_ID (or CMESH_AGENT_NAME) to ${user}`,
    );
  return { ...s, name, nodeName, agentId, bindHost: s.host, deviceIndex, deviceNamed: named !== undefined };
}

export function agentHelp(): string {
  return settingsHelp(AgentSettings, 'cmesh-rank-agent [flags]  (node apps/rank-agent/dist/main.js)');
}

export const AGENT_CONFIG = Symbol('AGENT_CONFIG');
