// What `cmesh run` asks of each worker besides torchrun's variables: a core (--bind-to, like
// `mpirun --bind-to`) and a metrics exporter (--metrics-port). The library does neither on its
// own; the launcher plans them here and passes explicit requests that initProcessGroup carries out:
// CMESH_RUN_BIND_CPU (bind the main thread to this CPU once the process runs, so V8's helper
// threads keep every core) and CMESH_RUN_METRICS_PORT / CMESH_RUN_METRICS_HOST.
import { Binding, InvalidArgumentError, LAUNCHER_BIND_ENV, LAUNCHER_METRICS_HOST_ENV, LAUNCHER_METRICS_PORT_ENV, planRankBinding } from '@cmesh/collectives';

export type BindTo = 'core' | 'none';

/** --bind-to core|none; unset (auto) = CMESH_BIND, else core when the node's ranks busy-poll. */
export function parseBindTo(v: string): BindTo {
  if (v !== 'core' && v !== 'none') throw new InvalidArgumentError(`--bind-to must be core or none, got ${JSON.stringify(v)}`);
  return v;
}

export interface WorkerPlacement {
  /** --bind-to; undefined: CMESH_BIND of the launcher's environment, else auto */
  bindTo?: BindTo;
  /** --metrics-port (default CMESH_METRICS_PORT): local rank k serves on port + k; 0 picks free ports */
  metricsPort?: number;
  metricsHost?: string;
}

/** Where local rank `local` of `localWorldSize` is bound (planned with the launcher's own allowed cores). */
export function planWorkerBinding(p: WorkerPlacement, env: NodeJS.ProcessEnv, local: number, localWorldSize: number, allowed?: readonly number[]): Binding {
  const mode = p.bindTo ?? env.CMESH_BIND;
  return planRankBinding({ ...env, CMESH_BIND: mode, LOCAL_RANK: String(local), LOCAL_WORLD_SIZE: String(localWorldSize) }, allowed);
}

/** The environment entries that ask worker `local` for its binding and exporter (empty strings clear inherited ones). */
export function placementEnv(p: WorkerPlacement, env: NodeJS.ProcessEnv, local: number, localWorldSize: number, allowed?: readonly number[]): Record<string, string> {
  const out: Record<string, string> = { [LAUNCHER_BIND_ENV]: '', [LAUNCHER_METRICS_PORT_ENV]: '', [LAUNCHER_METRICS_HOST_ENV]: '' };
  const binding = planWorkerBinding(p, env, local, localWorldSize, allowed);
  if ('cpu' in binding) out[LAUNCHER_BIND_ENV] = String(binding.cpu);
  if (p.metricsPort !== undefined) {
    out[LAUNCHER_METRICS_PORT_ENV] = String(p.metricsPort === 0 ? 0 : p.metricsPort + local);
    out[LAUNCHER_METRICS_HOST_ENV] = p.metricsHost ?? '127.0.0.1';
  }
  return out;
}

/** --metrics-port, else CMESH_METRICS_PORT (the launcher's setting), else none. */
export function metricsPortFrom(flag: number | undefined, env: NodeJS.ProcessEnv): number | undefined {
  if (flag !== undefined) return flag;
  const raw = env.CMESH_METRICS_PORT;
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`CMESH_METRICS_PORT must be a port in [0, 65535], got ${JSON.stringify(raw)}`);
  return n;
}
