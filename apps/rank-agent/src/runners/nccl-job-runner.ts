// The job runner of the `nccl` backend: the library's sidecar owner (NcclSidecar: spawns
// or attaches, says whether NCCL is usable here) and @cmesh/bench's nccl sweep on this agent's
// GPU, in lock-step with the other ranks, which find the NCCL unique id through the coordinator's
// store; its rows become per-size samples like the tcp runner's.
// Without a GPU the sidecar says why at hello, and that reason is what a job asking for nccl
// fails with.
import { NcclSidecar } from '@cmesh/collectives/nccl';
import { NcclUnavailableError } from '@cmesh/collectives';
import type { Store } from '@cmesh/collectives';
import { runNcclSweep } from '@cmesh/bench';
import type { BenchMode, JobAssignment } from '@cmesh/protocol';
import { JobAbortedError, JobRunner, RunnerAvailability, SweepHooks } from '../execution/job-runner';

/** A sidecar that went away is started again after this, then after twice as long while that fails (ms). */
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 60_000;

/** Several GPUs and no CMESH_DEVICE_INDEX / LOCAL_RANK: every agent of the host would pick device 0. */
export class DeviceNotNamedError extends Error {
  constructor(readonly deviceCount: number) {
    super(
      `this host has ${deviceCount} CUDA devices and the agent was not told which is its own: set CMESH_DEVICE_INDEX (--device) or LOCAL_RANK, one agent per GPU (CMESH_NCCL=0 runs it without the nccl backend)`,
    );
    this.name = 'DeviceNotNamedError';
  }
}

export interface SidecarLine {
  stream: 'stdout' | 'stderr';
  /** the job running on the sidecar when the line came, if any */
  job: string | null;
}

/**
 * The sidecar's output for the agent's log, each line tagged with the job it came during:
 * NCCL_DEBUG's lines (stdout) first of all, the first thing to read on a failed multi-GPU run.
 */
export class SidecarLog {
  job: string | null = null;
  constructor(private readonly write: (line: string, meta: SidecarLine) => void) {}
  readonly stdout = (line: string): void => this.write(line, { stream: 'stdout', job: this.job });
  readonly stderr = (line: string): void => this.write(line, { stream: 'stderr', job: this.job });
}

export interface NcclJobRunnerOptions {
  disabledReason?: string;
  /** false: the device is the default (0), refused where CUDA sees several. Default true. */
  deviceNamed?: boolean;
  /** tagged with the running job while one runs (the sidecar was made with its stdout/stderr) */
  sidecarLog?: SidecarLog;
}

export class NcclJobRunner implements JobRunner {
  readonly name = 'nccl' as const;
  private status: RunnerAvailability = { ok: false, reason: 'nccl backend not started' };
  /** while a sidecar that went away is being brought back: when to try next, and the wait after that */
  private recovery: { at: number; delayMs: number; running: boolean } | null = null;

  constructor(
    private readonly nccl: NcclSidecar | null,
    private readonly deviceIndex: number,
    /** the coordinator's store under a job's prefix (the unique id travels through it) */
    private readonly openStore: (prefix: string) => Promise<Store>,
    private readonly opts: NcclJobRunnerOptions = {},
  ) {
    if (!nccl) this.status = { ok: false, reason: opts.disabledReason ?? 'nccl backend disabled (CMESH_NCCL=0)' };
  }

  /**
   * Starts the sidecar; one that cannot run NCCL here is stopped at once (by pid), keeping its
   * reason. Throws DeviceNotNamedError (the agent does not start) on a host with several GPUs
   * when no device was named.
   */
  async start(): Promise<RunnerAvailability> {
    if (!this.nccl) return this.status;
    const status = await this.nccl.start();
    const deviceCount = this.nccl.hello?.deviceCount ?? 0;
    if (status.ok && this.opts.deviceNamed === false && deviceCount > 1) {
      await this.nccl.stop();
      throw new DeviceNotNamedError(deviceCount);
    }
    if (!status.ok) await this.nccl.stop();
    this.status = { ...status };
    return this.status;
  }

  /**
   * A sidecar that went away (crashed, killed, OOM) is started again, as a pod restarts its
   * containers: the first try a second after the loss was seen (so the coordinator hears of it
   * first), then with the wait doubling to a minute while it fails. Never runs two starts at once.
   */
  refresh(): void {
    if (!this.nccl || !this.status.ok) return; // never worked here: nothing to bring back
    if (!this.recovery) {
      if (!this.nccl.lost) return;
      this.recovery = { at: Date.now() + RESTART_FIRST_MS, delayMs: RESTART_FIRST_MS, running: false };
      return;
    }
    const r = this.recovery;
    if (r.running || Date.now() < r.at) return;
    r.running = true;
    void this.nccl.restart().then(
      (a) => {
        r.running = false;
        if (a.ok) this.recovery = null;
        else {
          r.delayMs = Math.min(r.delayMs * 2, RESTART_MAX_MS);
          r.at = Date.now() + r.delayMs;
        }
      },
      () => {
        r.running = false;
        r.at = Date.now() + r.delayMs;
      },
    );
  }

  /**
   * Where this agent's sidecar listens while it can run NCCL: its service group workers attach
   * there (one CUDA context per GPU, and the agent's library and binary settings), or null.
   */
  sidecarSocket(): string | null {
    return this.available().ok ? (this.nccl?.socketPath ?? null) : null;
  }

  available(): RunnerAvailability {
    return this.status.ok && this.nccl ? this.nccl.available() : this.status;
  }

  async run(a: JobAssignment, rank: number, hooks: SweepHooks, signal: AbortSignal): Promise<void> {
    const avail = this.available();
    if (!this.nccl || !avail.ok) throw new NcclUnavailableError(avail.reason ?? 'unavailable', a.sweep.op);
    const store = await this.openStore(a.storePrefix);
    const log = this.opts.sidecarLog;
    if (log) log.job = a.jobId;
    try {
      const sweep = runNcclSweep(this.nccl, {
        store,
        key: a.storePrefix,
        rank,
        worldSize: a.members.length,
        // this agent's GPU (its configured index), not one derived from the job rank
        device: this.deviceIndex,
        cases: [{ collective: a.sweep.op, dtype: a.sweep.dtype, redOp: a.sweep.redop, root: a.sweep.root }],
        sizes: a.sweep.sizes,
        modes: a.sweep.modes,
        warmup: a.sweep.warmup,
        iters: a.sweep.iters,
        verify: a.sweep.check,
        timeoutMs: a.sweep.timeoutMs,
        // job cancel aborts the communicator (the sidecar interrupts a collective in flight)
        signal,
      });
      hooks.onJoined(`cuda:${this.deviceIndex} [nccl]`);
      const aborted = new Promise<never>((_, reject) => {
        const onAbort = () => reject(new JobAbortedError(String(signal.reason ?? 'aborted')));
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
      const rows = await Promise.race([sweep, aborted]);
      // device-timed mean per iteration: one sample per size and mode (out of place, in place)
      const bySize = new Map<number, { count: number; variants: { mode: BenchMode; times: number[]; wrong: number | null }[] }>();
      for (const r of rows) {
        const s = bySize.get(r.sizeBytes) ?? { count: r.count, variants: [] };
        s.variants.push({ mode: r.mode, times: [r.timeSeconds], wrong: r.wrong });
        bySize.set(r.sizeBytes, s);
      }
      for (const [bytes, s] of bySize) hooks.onSize({ requestedBytes: bytes, bytes, count: s.count, variants: s.variants });
    } finally {
      if (log?.job === a.jobId) log.job = null;
      await store.close().catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    await this.nccl?.stop();
  }
}
