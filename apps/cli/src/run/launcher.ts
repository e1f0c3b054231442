// `cmesh run`: torchrun for Node. Starts --nproc-per-node workers with torchrun's environment,
// prefixes their output with the rank, and when one fails stops the others (on every node) and
// exits non-zero naming the failed rank and its exit code. Like mpirun it binds each worker to a
// core (--bind-to) and asks it for a metrics exporter (--metrics-port): see binding.ts.
import { spawn } from 'child_process';
import * as os from 'os';
import { ChildExit, ChildGroup, describeExit, toEnvVars } from '@cmesh/collectives';
import { placementEnv } from './binding';
import { prefixLines } from './line-prefix';
import { NodeAssignment, RunOptions, rdzvBackend } from './rdzv';
import './rdzv-c10d';
import './rdzv-nats';
import { workerCommand } from './script';

/** How long to wait for the last output of exited workers (a grandchild may hold the pipe open). */
const DRAIN_MS = 2000;

export interface LaunchResult {
  exitCode: number;
  message?: string;
}

export function failureMessage(e: ChildExit, node: Pick<NodeAssignment, 'rankOffset' | 'nodeRank' | 'nnodes'>): string {
  const where = node.nnodes > 1 ? ` on node ${node.nodeRank}` : '';
  return `cmesh run: rank ${e.rank} (local_rank ${e.rank - node.rankOffset}) failed with ${describeExit(e)}${where}`;
}

export async function launch(o: RunOptions, script: string, args: string[]): Promise<LaunchResult> {
  const node: NodeAssignment = await rdzvBackend(o.rdzvBackend)(o);
  const cmd = workerCommand(script, args);
  const outputs: Promise<void>[] = [];
  const children = Array.from({ length: o.nprocPerNode }, (_, local) => {
    const rank = node.rankOffset + local;
    const child = spawn(cmd.command, cmd.args, {
      stdio: ['inherit', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...cmd.env,
        ...toEnvVars({
          RANK: rank,
          LOCAL_RANK: local,
          WORLD_SIZE: node.worldSize,
          LOCAL_WORLD_SIZE: o.nprocPerNode,
          GROUP_RANK: node.nodeRank,
          MASTER_ADDR: node.masterAddr,
          MASTER_PORT: node.masterPort,
          CMESH_RUN_ID: o.rdzvId,
        }),
        ...placementEnv(o.placement ?? {}, process.env, local, o.nprocPerNode),
      },
    });
    child.on('error', (err) => process.stderr.write(`cmesh run: cannot start ${cmd.command} for rank ${rank}: ${err.message}\n`));
    outputs.push(prefixLines(child.stdout!, process.stdout, `[rank${rank}]:`), prefixLines(child.stderr!, process.stderr, `[rank${rank}]:`));
    return { rank, child };
  });
  const group = new ChildGroup(children);

  let localFailure: string | undefined;
  let stoppedBy: { message: string; exitCode: number } | undefined;
  // tell the other nodes at once, not after the local workers have been stopped
  group.onFailure((e) => {
    localFailure = failureMessage(e, node);
    void node.reportFailure(localFailure);
  });
  const stopWatching = node.watchFailures((message) => {
    if (localFailure || stoppedBy) return;
    stoppedBy = { message: message.startsWith('cmesh run:') ? message : `cmesh run: stopped because ${message}`, exitCode: 1 };
    group.stop();
  });
  const onSignal = (sig: NodeJS.Signals) => {
    if (!stoppedBy && !localFailure) {
      const message = `cmesh run: interrupted by ${sig}${node.nnodes > 1 ? ` on node ${node.nodeRank}` : ''}`;
      stoppedBy = { message, exitCode: 128 + (os.constants.signals[sig] ?? 15) };
      void node.reportFailure(message);
    }
    group.stop(sig === 'SIGINT' ? 'SIGINT' : 'SIGTERM');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let failure: ChildExit | undefined;
  try {
    failure = await group.wait();
    await Promise.race([Promise.all(outputs), new Promise((r) => setTimeout(r, DRAIN_MS).unref())]);
  } finally {
    stopWatching();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  let result: LaunchResult = { exitCode: 0 };
  if (failure && localFailure) {
    await node.reportFailure(localFailure);
    result = { exitCode: failure.code && failure.code > 0 ? failure.code : 1, message: localFailure };
  } else if (stoppedBy) {
    result = stoppedBy;
  }
  await node.finish();
  return result;
}
