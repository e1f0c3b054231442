// Jobs' sweeps on the CPU data plane, in a child process of the agent: the library's default
// process group is process-global, so a job that fails (a dead peer, a timeout) is ended by
// killing this process and can never wedge the agent. After a job that ended cleanly (process
// group destroyed) the agent may reuse the process for its next job; each job's settings
// (LOCAL_RANK, CMESH_ALGO, ...: job-env.ts) go to its process group as options, never into
// process.env. The process group bootstraps through the coordinator's store
// (nats://host:port/<job prefix>).
// The library binds no core and starts no exporter on its own: like `cmesh run`, this worker binds
// its main thread for each job (CMESH_BIND, the agent's setting: default a core of its own when the
// job's ranks on this host busy-poll) and starts the exporter CMESH_METRICS_PORT asks for.
import * as dist from '@cmesh/collectives';
import { runRankSweep } from '@cmesh/bench';
import { BenchSweepSchema, SizeSamplesMsg } from '@cmesh/protocol';
import { jobEnv } from './job-env';
import { natsInitMethod } from './nats-init-method';
import type { FromWorker, ToWorker } from './worker-ipc';
import { errorToJobError } from '../../execution/job-error';

/** the cores this worker may use, read before any job bound it to one */
const ALLOWED_CPUS = dist.allowedCpus();
let exporter: Promise<unknown> | undefined;
let bound = false;

/**
 * Binds as `cmesh run` binds its workers, once the job's process group is up (a bound main thread
 * sees one core, and the data plane decides whether to busy-poll from the cores it sees).
 */
function bindForJob(env: NodeJS.ProcessEnv): void {
  const plan = dist.planRankBinding(env, ALLOWED_CPUS);
  if ('cpu' in plan) bound = 'cpu' in dist.bindToCore({ cpu: plan.cpu });
}

/** The previous job's binding is not this one's: every core back before the next process group. */
function unbindPreviousJob(): void {
  if (bound) dist.unbindMainThread(ALLOWED_CPUS);
  bound = false;
}

function send(msg: FromWorker): Promise<void> {
  return new Promise((resolve, reject) => process.send!(msg, undefined, {}, (err) => (err ? reject(err) : resolve())));
}

async function run(m: ToWorker): Promise<void> {
  const { assignment, rank } = m;
  const worldSize = assignment.members.length;
  const env = jobEnv(assignment, rank, m.algorithm);
  unbindPreviousJob();
  // one exporter per worker, on CMESH_METRICS_PORT + the LOCAL_RANK of its first job
  exporter ??= env.CMESH_METRICS_PORT
    ? dist.startExporterFromEnv(env).catch((e: Error) => console.error(`cmesh: metrics exporter not started: ${e.message}`))
    : undefined;
  const sweep = BenchSweepSchema.parse(assignment.sweep);
  await dist.initProcessGroup({
    backend: 'tcp',
    initMethod: natsInitMethod(m.natsUrl, assignment.storePrefix),
    // the coordinator's secret for this job, from the assignment only the member agents read
    secret: assignment.secret,
    rank,
    worldSize,
    timeout: sweep.timeoutMs,
    bindToCore: false, // bound below, for this job
    env,
  });
  bindForJob(env);
  await send({ type: 'joined', device: 'cpu [tcp]' });
  const pending: Promise<void>[] = [];
  let seen = dist.getTrafficCounters();
  const onSize = (samples: SizeSamplesMsg) => {
    const now = dist.getTrafficCounters();
    const wire = { sent: now.bytesSent - seen.bytesSent, received: now.bytesReceived - seen.bytesReceived };
    seen = now;
    pending.push(send({ type: 'size', samples: { ...samples, wire } }));
  };
  await runRankSweep({ dist, sweep, onSize });
  await Promise.all(pending);
  await dist.destroyProcessGroup();
  await send({ type: 'done' });
}

if (!process.send) {
  console.error('job-worker is started by the rank agent (needs an IPC channel)');
  process.exit(2);
}
// The agent died or dropped us: nothing to report to, stop at once.
process.on('disconnect', () => process.exit(1));
let busy = false;
process.on('message', (m: ToWorker) => {
  if (busy || dist.isInitialized()) {
    void send({ type: 'failed', error: { name: 'WorkerBusyError', message: `job worker ${process.pid} is still running a job` } });
    return;
  }
  busy = true;
  run(m).then(
    () => {
      busy = false;
    },
    async (err) => {
      console.error(`job ${m.assignment.jobId} rank ${m.rank} (worker ${process.pid}): ${(err as Error)?.stack ?? err}`);
      await send({ type: 'failed', error: errorToJobError(err) }).catch(() => undefined);
      process.exit(1);
    },
  );
});
// everything is loaded: the agent may count on this worker for its next job
void send({ type: 'ready' }).catch(() => undefined);
