// The soak's users: jobs submitted continuously (a few in flight) to whichever coordinator
// replica answers, each followed until it ends. Each submission carries an idempotency key and is
// sent again with it, to any live replica, while no answer comes (a replica or NATS server just
// killed); one still unanswered after ANSWER_MS is lost. A submission the mesh refuses with an
// error reply is a refusal the user saw (not a lost job); a job it accepted must end.
import { JobRecord, JobRequestInput, isFinished } from '@cmesh/protocol';
import { randomUUID } from 'crypto';
import { MeshApiError, answerMayBeLost } from '@cmesh/testing/mesh';
import { ChaosMesh } from './chaos-mesh';
import { setTimeout as sleep } from 'timers/promises';

export interface TrackedJob {
  id: string;
  /** the submission's first attempt */
  submittedAt: number;
  /** when an answer (the job's id) came back */
  answeredAt: number;
  /** the last record read; undefined until one could be read */
  last?: JobRecord;
  /** why it waited, as a queued record said */
  waited?: string;
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

/** A submission still unanswered this long after its first attempt is lost. */
export const ANSWER_MS = 45_000;

/** A submission no replica ever answered. */
export interface Unanswered {
  key: string;
  at: number;
  attempts: number;
  lastError: string;
}

export class Workload {
  readonly jobs: TrackedJob[] = [];
  /** submissions never answered (lost: the user never learnt a job id) */
  readonly unanswered: Unanswered[] = [];
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
    const key = randomUUID();
    const at = Date.now();
    let attempts = 0;
    let lastError = 'no replica running';
    while (Date.now() - at < ANSWER_MS) {
      const client = this.pick(this.mesh.clients());
      if (!client) {
        await sleep(200);
        continue;
      }
      attempts++;
      try {
        const rec = await client.submitJob(SOAK_JOB, { idempotencyKey: key, retryForMs: 0 });
        const job: TrackedJob = {
          id: rec.id,
          submittedAt: at,
          answeredAt: Date.now(),
          last: rec,
          ...(rec.state === 'queued' && rec.reason ? { waited: rec.reason } : {}),
        };
        this.jobs.push(job);
        return job;
      } catch (e) {
        // an error reply is a refusal the user saw; no answer (the replica or its NATS server just
        // killed) or a 503 is sent again with the same key, to whichever replica is up
        if (e instanceof MeshApiError && !answerMayBeLost(e.status)) {
          this.refused.push(e.message);
          await sleep(200);
          return undefined;
        }
        lastError = (e as Error).message;
        await sleep(200);
      }
    }
    this.unanswered.push({ key, at, attempts, lastError });
    return undefined;
  }

  /** Reads the job's record from any live replica (they share the records). */
  async read(job: TrackedJob): Promise<void> {
    for (const c of this.mesh.clients()) {
      try {
        job.last = await c.job(job.id);
        if (job.last.state === 'queued' && job.last.reason) job.waited = job.last.reason;
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

  /** The ids of the jobs some replica still knows (its last record kept); a job every replica answers 404 for is lost. */
  async known(): Promise<Set<string>> {
    const known = new Set<string>();
    for (const j of this.jobs) {
      const answers = await Promise.all(
        this.mesh.clients().map((c) =>
          c.job(j.id).then(
            (r) => ((j.last = r), 'known'),
            (e) => (e instanceof MeshApiError && e.status === 404 ? 'missing' : 'unreachable'),
          ),
        ),
      );
      if (!answers.every((a) => a === 'missing')) known.add(j.id);
    }
    return known;
  }
}
