// The soak's users: jobs submitted continuously (a few in flight) to whichever coordinator
// replica answers, each followed until it ends. A submission the mesh refuses with an error
// reply is a refusal the user saw (not a lost job); a job it accepted must end.
import { JobRecord, JobRequestInput, isFinished } from '@cmesh/protocol';
import { MeshApiError } from '../../apps/cli/src/mesh/client';
import { ChaosMesh } from './chaos-mesh';

export interface TrackedJob {
  id: string;
  submittedAt: number;
  /** the last record read; undefined until one could be read */
  last?: JobRecord;
}

export const SOAK_JOB: JobRequestInput = {
  op: 'allReduce',
  sizes: [8, 1024, 65536],
  iters: 20,
  warmup: 1,
  nranks: 2,
  onBusy: 'wait',
  // a paused rank is found by its peers' timeout: short, so detection is quick
  timeoutMs: 3000,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Workload {
  readonly jobs: TrackedJob[] = [];
  /** submissions refused with an error reply (status >= 400), by message */
  readonly refused: string[] = [];
  private stopping = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly mesh: ChaosMesh,
    private readonly rng: () => number,
  ) {}

  /** `inFlight` submit-and-follow loops until stop(). */
  start(inFlight: number): void {
    for (let i = 0; i < inFlight; i++) this.loops.push(this.loop());
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }

  /** Jobs that were accepted and have not ended (as last read). */
  open(): TrackedJob[] {
    return this.jobs.filter((j) => !j.last || !isFinished(j.last.state));
  }

  private pick<T>(xs: T[]): T | undefined {
    return xs.length ? xs[Math.floor(this.rng() * xs.length)] : undefined;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      const job = await this.submit();
      if (!job) continue;
      // follow it while the soak runs; what is still open at the end is settled by refresh()
      while (!this.stopping && !(job.last && isFinished(job.last.state))) {
        await this.read(job);
        await sleep(250);
      }
    }
  }

  private async submit(): Promise<TrackedJob | undefined> {
    const client = this.pick(this.mesh.clients());
    if (!client) return void (await sleep(200));
    try {
      const rec = await client.submitJob(SOAK_JOB);
      const job: TrackedJob = { id: rec.id, submittedAt: Date.now(), last: rec };
      this.jobs.push(job);
      return job;
    } catch (e) {
      // unreachable (the replica was just killed): the user retries elsewhere; an error reply is a refusal
      if (e instanceof MeshApiError && e.status >= 400) this.refused.push(e.message);
      await sleep(200);
      return undefined;
    }
  }

  /** Reads the job's record from any live replica (they share the records). */
  async read(job: TrackedJob): Promise<void> {
    for (const c of this.mesh.clients()) {
      try {
        job.last = await c.job(job.id);
        return;
      } catch {
        /* this replica cannot answer now: ask another */
      }
    }
  }

  /** After the faults stop: reads every open job until all ended or `timeoutMs` passed. */
  async settle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.open().length && Date.now() < deadline) {
      for (const j of this.open()) await this.read(j);
      await sleep(500);
    }
  }
}
