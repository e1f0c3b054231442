// The launcher's environment contract (torchrun's), shared by `cmesh run`, spawn() and agents.
// The first block is what every launcher sets; the elastic block is what torchrun's elastic agent
// adds (cmesh run sets it, agents and spawn() do not).
export interface LaunchEnv {
  RANK: number;
  LOCAL_RANK: number;
  WORLD_SIZE: number;
  LOCAL_WORLD_SIZE: number;
  GROUP_RANK: number;
  MASTER_ADDR: string;
  MASTER_PORT: number;
  CMESH_RUN_ID?: string;
  /** Number of nodes (worker groups) in this rendezvous round. */
  GROUP_WORLD_SIZE?: number;
  /** --role (torchrun's default: `default`); one role per job, so ROLE_RANK = RANK. */
  ROLE_NAME?: string;
  ROLE_RANK?: number;
  ROLE_WORLD_SIZE?: number;
  /** Worker-group restarts after failures so far, and --max-restarts. */
  TORCHELASTIC_RESTART_COUNT?: number;
  TORCHELASTIC_MAX_RESTARTS?: number;
  /** --rdzv-id */
  TORCHELASTIC_RUN_ID?: string;
  /** torch's flag for workers that would reuse the launcher's store; cmesh workers never do: False. */
  TORCHELASTIC_USE_AGENT_STORE?: 'True' | 'False';
  /** Where record() writes this worker's error for the launcher's failure summary. */
  TORCHELASTIC_ERROR_FILE?: string;
}

export function toEnvVars(e: LaunchEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(e)) if (v !== undefined) out[k] = String(v);
  return out;
}

/** Reads the contract back in a worker (undefined fields where unset). */
export function readLaunchEnv(env: NodeJS.ProcessEnv = process.env): Partial<LaunchEnv> {
  const num = (k: string) => (env[k] === undefined ? undefined : Number(env[k]));
  const agentStore = env.TORCHELASTIC_USE_AGENT_STORE;
  return {
    RANK: num('RANK'),
    LOCAL_RANK: num('LOCAL_RANK'),
    WORLD_SIZE: num('WORLD_SIZE'),
    LOCAL_WORLD_SIZE: num('LOCAL_WORLD_SIZE'),
    GROUP_RANK: num('GROUP_RANK'),
    MASTER_ADDR: env.MASTER_ADDR,
    MASTER_PORT: num('MASTER_PORT'),
    CMESH_RUN_ID: env.CMESH_RUN_ID,
    GROUP_WORLD_SIZE: num('GROUP_WORLD_SIZE'),
    ROLE_NAME: env.ROLE_NAME,
    ROLE_RANK: num('ROLE_RANK'),
    ROLE_WORLD_SIZE: num('ROLE_WORLD_SIZE'),
    TORCHELASTIC_RESTART_COUNT: num('TORCHELASTIC_RESTART_COUNT'),
    TORCHELASTIC_MAX_RESTARTS: num('TORCHELASTIC_MAX_RESTARTS'),
    TORCHELASTIC_RUN_ID: env.TORCHELASTIC_RUN_ID,
    TORCHELASTIC_USE_AGENT_STORE: agentStore === 'True' || agentStore === 'False' ? agentStore : undefined,
    TORCHELASTIC_ERROR_FILE: env.TORCHELASTIC_ERROR_FILE,
  };
}
