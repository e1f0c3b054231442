// What `cmesh run` asks of each worker besides torchrun's variables: a core (--bind-to, like
// `mpirun --bind-to`) and a metrics exporter (--metrics-port). The library does neither on its
// own; the launcher plans them here and passes explicit requests that initProcessGroup carries out:
// CMESH_RUN_BIND_CPU (bind the main thread to this CPU once the process runs, so V8's helper
// threads keep every core) and CMESH_RUN_METRICS_PORT / CMESH_RUN_METRICS_HOST.
// More workers than the CPUs the node lets this process use (its affinity capped by the cgroup's
// quota, cpu-quota.ts) are never pinned, whatever --bind-to says (two workers on one core). When the
// quota is what falls short they do not busy-poll either (CMESH_SPIN_US=0 unless the user set it):
// a worker spinning on a quota burns the time its peer needs, and the data plane sees only the
// affinity, not the quota (with too few allowed cores it stops spinning on its own).
import { Binding, InvalidArgumentError, LAUNCHER_BIND_ENV, LAUNCHER_METRICS_HOST_ENV, LAUNCHER_METRICS_PORT_ENV, planRankBinding } from '@cmesh/collectives';
import { CpuBudget, cpuBudget } from './cpu-quota';

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

/** True when `localWorldSize` workers are more than the CPUs this node's quota and affinity give. */
function overQuota(localWorldSize: number, budget: CpuBudget): boolean {
  return localWorldSize > budget.cpus;
}

/** The quota, not the affinity, is what leaves too few CPUs: the data plane cannot see it. */
function quotaLimited(localWorldSize: number, budget: CpuBudget): boolean {
  return overQuota(localWorldSize, budget) && budget.cpus < budget.affinity;
}

/**
 * The line the launcher prints when it holds back: a quota too small for the workers, or a binding
 * asked for (--bind-to core, CMESH_BIND=core) that would put two workers on one core. Undefined
 * otherwise (more workers than cores with no quota: the data plane sees that itself).
 */
export function quotaNote(localWorldSize: number, budget: CpuBudget, env: NodeJS.ProcessEnv, bindTo?: BindTo): string | undefined {
  if (!overQuota(localWorldSize, budget)) return undefined;
  const limited = quotaLimited(localWorldSize, budget);
  if (!limited && (bindTo ?? env.CMESH_BIND) !== 'core') return undefined;
  const where = limited ? `a CPU quota of ${+budget.quota!.toFixed(2)} (${budget.source})` : `${budget.affinity} CPUs allowed`;
  const held = `${localWorldSize} workers on ${budget.cpus} usable CPUs (${where}): not pinned to cores`;
  if (!limited) return held;
  return `${held}, ${env.CMESH_SPIN_US ? `busy-polling as CMESH_SPIN_US=${env.CMESH_SPIN_US} says` : 'no busy-polling'}`;
}

/** Where local rank `local` of `localWorldSize` is bound (planned with the launcher's own allowed cores). */
function planWorkerBinding(
  p: WorkerPlacement,
  env: NodeJS.ProcessEnv,
  local: number,
  localWorldSize: number,
  allowed?: readonly number[],
  budget: CpuBudget = cpuBudget(),
): Binding {
  if (overQuota(localWorldSize, budget)) return { skipped: `${localWorldSize} workers on ${budget.cpus} usable CPUs` };
  const mode = p.bindTo ?? env.CMESH_BIND;
  return planRankBinding({ ...env, CMESH_BIND: mode, LOCAL_RANK: String(local), LOCAL_WORLD_SIZE: String(localWorldSize) }, allowed);
}

/** The environment entries that ask worker `local` for its binding and exporter (empty strings clear inherited ones). */
export function placementEnv(
  p: WorkerPlacement,
  env: NodeJS.ProcessEnv,
  local: number,
  localWorldSize: number,
  allowed?: readonly number[],
  budget: CpuBudget = cpuBudget(),
): Record<string, string> {
  const out: Record<string, string> = { [LAUNCHER_BIND_ENV]: '', [LAUNCHER_METRICS_PORT_ENV]: '', [LAUNCHER_METRICS_HOST_ENV]: '' };
  const binding = planWorkerBinding(p, env, local, localWorldSize, allowed, budget);
  if ('cpu' in binding) out[LAUNCHER_BIND_ENV] = String(binding.cpu);
  // the workers' data plane compares LOCAL_WORLD_SIZE with the affinity only; the quota is ours to apply
  if (quotaLimited(localWorldSize, budget) && !env.CMESH_SPIN_US) out.CMESH_SPIN_US = '0';
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
