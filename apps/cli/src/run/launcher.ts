// `cmesh run`: torchrun for Node, its elastic agent included. Round after round it enters the
// rendezvous, starts --nproc-per-node workers with torchrun's environment and looks at them once
// per --monitor-interval. A worker failure restarts the whole worker group on every node in a new
// round while --max-restarts lasts (a lost node too; a node joining late restarts the groups
// without counting); after that the launcher stops the workers on every node and exits non-zero
// with torch's failure summary. Like mpirun it binds each worker to a core (--bind-to) and asks it
// for a metrics exporter (--metrics-port): see binding.ts.
import * as fs from 'fs';
import * as os from 'os';
import { ChildExit, describeExit } from '@cmesh/collectives';
import { WorkerFailure, exitcodeOf, formatFailureSummary } from './failure-summary';
import { DEFAULT_MONITOR_INTERVAL_MS, JoinReason, RoundAssignment, RoundEvent, RunOptions, rdzvBackend } from './rdzv';
import './rdzv-c10d';
import './rdzv-nats';
import { workerCommand } from './script';
import { WorkerGroup, startWorkers } from './worker-group';
import { WorkerLogs } from './worker-logs';
import { setTimeout as sleep } from 'timers/promises';

/** How long to wait for the last output of exited workers (a grandchild may hold the pipe open). */
const DRAIN_MS = 2000;

export interface LaunchResult {
  exitCode: number;
  message?: string;
}

function failureMessage(e: Pick<ChildExit, 'rank' | 'code' | 'signal'>, node: Pick<RoundAssignment, 'rankOffset' | 'nodeRank' | 'nnodes'>): string {
  const where = node.nnodes > 1 ? ` on node ${node.nodeRank}` : '';
  return `cmesh run: rank ${e.rank} (local_rank ${e.rank - node.rankOffset}) failed with ${describeExit(e)}${where}`;
}

type Outcome = { kind: 'succeeded' } | { kind: 'interrupted' } | { kind: 'workers-failed'; failures: ChildExit[] } | RoundEvent;

/** Looks at the workers and the rendezvous once per interval until something happens (torch's monitor loop). */
async function monitor(w: WorkerGroup, round: RoundAssignment, intervalMs: number, interrupted: () => boolean): Promise<Outcome> {
  for (;;) {
    await sleep(intervalMs);
    if (interrupted()) return { kind: 'interrupted' };
    const state = w.group.state();
    if (state === 'failed') return { kind: 'workers-failed', failures: w.group.failures() };
    if (state === 'succeeded') return { kind: 'succeeded' };
    const event = await round.check();
    if (event) return event;
  }
}

/** Stops the workers and waits until they and their output are gone. */
async function stopWorkers(w: WorkerGroup, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  w.group.stop(signal);
  await w.group.wait();
  await Promise.race([w.outputs, sleep(DRAIN_MS)]);
}

export async function launch(o: RunOptions, script: string, args: string[]): Promise<LaunchResult> {
  const rdzv = await rdzvBackend(o.rdzvBackend)(o);
  const logs = WorkerLogs.create(o.logs ?? {}, o.rdzvId);
  if (logs.writesFiles) process.stderr.write(`cmesh run: worker logs in ${logs.dir}\n`);
  const cmd = workerCommand(script, args);
  const maxRestarts = o.maxRestarts ?? 0;
  const abort = new AbortController();
  let current: WorkerGroup | undefined;
  let interrupted: LaunchResult | undefined;
  let nodeLabel = '';
  const onSignal = (sig: NodeJS.Signals) => {
    if (!interrupted) {
      const message = `cmesh run: interrupted by ${sig}${nodeLabel}`;
      interrupted = { message, exitCode: 128 + (os.constants.signals[sig] ?? 15) };
      void rdzv.reportFailure(message);
      abort.abort();
    }
    current?.group.stop(sig === 'SIGINT' ? 'SIGINT' : 'SIGTERM');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let result: LaunchResult | undefined;
  let summaryNamesFiles = false;
  let reason: JoinReason = 'start';
  try {
    while (!result) {
      let round: RoundAssignment;
      try {
        round = await rdzv.next(reason, abort.signal);
      } catch (err) {
        result = interrupted ?? { exitCode: 1, message: `cmesh run: ${(err as Error).message}` };
        break;
      }
      nodeLabel = round.nnodes > 1 ? ` on node ${round.nodeRank}` : '';
      const w = startWorkers(o, round, cmd, logs.attempt(round.restartCount, o.nprocPerNode));
      current = w;
      const outcome = await monitor(w, round, o.monitorIntervalMs ?? DEFAULT_MONITOR_INTERVAL_MS, () => interrupted !== undefined);
      const restartsLeft = round.restartCount < maxRestarts;
      switch (outcome.kind) {
        case 'succeeded':
          await Promise.race([w.outputs, sleep(DRAIN_MS)]);
          result = { exitCode: 0 };
          break;
        case 'interrupted':
          await stopWorkers(w, 'SIGTERM');
          result = interrupted!;
          break;
        case 'workers-failed': {
          // the first observed failure is the root cause; the others often follow from it
          const root = outcome.failures.reduce((a, b) => (b.at < a.at ? b : a));
          const message = failureMessage(root, round);
          if (restartsLeft) {
            await round.requestRestart(); // tell the other nodes before stopping ours
            process.stderr.write(
              `${message}; restarting the workers${round.nnodes > 1 ? ' on every node' : ''} (restart ${round.restartCount + 1} of ${maxRestarts})\n`,
            );
            await stopWorkers(w);
            reason = 'failure';
            break;
          }
          await rdzv.reportFailure(message); // tell the other nodes at once, not after ours have stopped
          await stopWorkers(w);
          const failures: WorkerFailure[] = outcome.failures.map((f) => ({
            rank: f.rank,
            localRank: f.rank - w.rankOffset,
            exitcode: exitcodeOf(f.code, f.signal),
            pid: f.pid,
            at: f.at,
            errorFile: w.streams[f.rank - w.rankOffset].errorFile,
          }));
          summaryNamesFiles = failures.some((f) => fs.existsSync(f.errorFile));
          const exitcode = exitcodeOf(root.code, root.signal);
          result = { exitCode: exitcode > 0 ? exitcode : 1, message: `${message}${formatFailureSummary(script, failures)}` };
          break;
        }
        case 'node-lost':
          if (restartsLeft) {
            await round.requestRestart();
            process.stderr.write(
              `${outcome.message}; restarting the workers${round.nnodes > 1 ? ' on every node' : ''} (restart ${round.restartCount + 1} of ${maxRestarts})\n`,
            );
            await stopWorkers(w);
            reason = 'failure';
            break;
          }
          await rdzv.reportFailure(outcome.message);
          await stopWorkers(w);
          result = { exitCode: 1, message: outcome.message };
          break;
        case 'new-round':
          process.stderr.write(`${outcome.message}\n`);
          await stopWorkers(w);
          reason = 'new-round';
          break;
        case 'failed':
          await stopWorkers(w);
          result = { exitCode: 1, message: outcome.message };
          break;
      }
      current = undefined;
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  await rdzv.finish(result.exitCode === 0 ? 'succeeded' : 'failed');
  logs.cleanup(summaryNamesFiles);
  return result;
}
