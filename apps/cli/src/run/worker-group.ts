// Starts one round's workers on this node with torchrun's environment (the elastic agent's
// variables included) and routes their output (worker-logs.ts).
import { spawn } from 'child_process';
import { ChildGroup, toEnvVars } from '@cmesh/collectives';
import { placementEnv } from './binding';
import { cpuBudget } from './cpu-quota';
import { traceEnv } from './trace-env';
import type { RoundAssignment, RunOptions } from './rdzv';
import { WorkerStreams, routeStream } from './worker-logs';

const DEFAULT_ROLE = 'default';

export interface WorkerGroup {
  group: ChildGroup;
  /** Resolves when every worker's output has been written out. */
  outputs: Promise<void>;
  streams: WorkerStreams[];
  rankOffset: number;
}

export function startWorkers(
  o: RunOptions,
  round: RoundAssignment,
  cmd: { command: string; args: string[]; env: Record<string, string> },
  streams: WorkerStreams[],
): WorkerGroup {
  const outputs: Promise<void>[] = [];
  const budget = cpuBudget();
  const children = streams.map((s, local) => {
    const rank = round.rankOffset + local;
    const child = spawn(cmd.command, cmd.args, {
      stdio: ['inherit', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...cmd.env,
        ...toEnvVars({
          RANK: rank,
          LOCAL_RANK: local,
          WORLD_SIZE: round.worldSize,
          LOCAL_WORLD_SIZE: o.nprocPerNode,
          GROUP_RANK: round.nodeRank,
          GROUP_WORLD_SIZE: round.nnodes,
          // one role per job (torchrun's --role): role ranks are the global ranks
          ROLE_NAME: o.role ?? DEFAULT_ROLE,
          ROLE_RANK: rank,
          ROLE_WORLD_SIZE: round.worldSize,
          MASTER_ADDR: round.masterAddr,
          MASTER_PORT: round.masterPort,
          TORCHELASTIC_RESTART_COUNT: round.restartCount,
          TORCHELASTIC_MAX_RESTARTS: o.maxRestarts ?? 0,
          TORCHELASTIC_RUN_ID: o.rdzvId,
          // workers start their own store at MASTER_ADDR:MASTER_PORT; none reuses the launcher's
          TORCHELASTIC_USE_AGENT_STORE: 'False',
          TORCHELASTIC_ERROR_FILE: s.errorFile,
          CMESH_RUN_ID: o.rdzvId,
          // the run's secret: the workers' store and data plane admit only each other
          ...(o.secret ? { CMESH_SECRET: o.secret } : {}),
        }),
        ...placementEnv(o.placement ?? {}, process.env, local, o.nprocPerNode, undefined, budget),
        ...traceEnv(o),
      },
    });
    child.on('error', (err) => process.stderr.write(`cmesh run: cannot start ${cmd.command} for rank ${rank}: ${err.message}\n`));
    outputs.push(
      routeStream(child.stdout!, s.stdout, process.stdout, `[rank${rank}]:`),
      routeStream(child.stderr!, s.stderr, process.stderr, `[rank${rank}]:`),
    );
    return { rank, child };
  });
  // the launcher looks at its workers once per --monitor-interval and stops them itself
  const group = new ChildGroup(children, { stopOnFailure: false });
  return { group, outputs: Promise.all(outputs).then(() => undefined), streams, rankOffset: round.rankOffset };
}
