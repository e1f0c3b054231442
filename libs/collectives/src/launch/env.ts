// The launcher's environment contract (torchrun's), shared by `cmesh run`, spawn() and agents.
export interface LaunchEnv {
  RANK: number;
  LOCAL_RANK: number;
  WORLD_SIZE: number;
  LOCAL_WORLD_SIZE: number;
  GROUP_RANK: number;
  MASTER_ADDR: string;
  MASTER_PORT: number;
  CMESH_RUN_ID?: string;
}

export function toEnvVars(e: LaunchEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(e)) if (v !== undefined) out[k] = String(v);
  return out;
}

/** Reads the contract back in a worker (undefined fields where unset). */
export function readLaunchEnv(env: NodeJS.ProcessEnv = process.env): Partial<LaunchEnv> {
  const num = (k: string) => (env[k] === undefined ? undefined : Number(env[k]));
  return {
    RANK: num('RANK'),
    LOCAL_RANK: num('LOCAL_RANK'),
    WORLD_SIZE: num('WORLD_SIZE'),
    LOCAL_WORLD_SIZE: num('LOCAL_WORLD_SIZE'),
    GROUP_RANK: num('GROUP_RANK'),
    MASTER_ADDR: env.MASTER_ADDR,
    MASTER_PORT: num('MASTER_PORT'),
    CMESH_RUN_ID: env.CMESH_RUN_ID,
  };
}
