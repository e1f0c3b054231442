// How much memory a job's sweep needs in the job worker, and how much this agent may give it, so
// that a job too large for the host is refused with a reason naming the agent before the worker
// allocates anything, rather than the kernel's OOM killer ending the worker (or the agent).
import { readFileSync } from 'fs';
import { totalmem } from 'os';
import { benchShape } from '@cmesh/bench';
import { elementSize } from '@cmesh/collectives';
import type { JobSweep } from '@cmesh/protocol';

/** What a job worker holds besides the sweep's buffers (Node, the library, the data plane's staging). */
export const WORKER_BASE_BYTES = 256 * 2 ** 20;

/**
 * Bytes the worker holds at once for the sweep's largest size: step.ts keeps the input pattern,
 * the garbage pattern, the send and the receive buffer (2 x (send + recv)), and the data plane
 * needs about one more buffer of the larger side (a reduction's incoming chunks, early frames).
 */
export function sweepWorkerBytes(sweep: Pick<JobSweep, 'op' | 'dtype' | 'sizes'>, nranks: number): number {
  const es = elementSize(sweep.dtype);
  let most = 0;
  for (const bytes of sweep.sizes) {
    const s = benchShape(sweep.op, bytes, es, nranks);
    const send = s.sendCount * es;
    const recv = s.recvCount * es;
    most = Math.max(most, 2 * (send + recv) + Math.max(send, recv));
  }
  return WORKER_BASE_BYTES + most;
}

/** The cgroup's memory limit (v2 memory.max, else v1 memory.limit_in_bytes), or undefined when none is set. */
export function cgroupMemoryLimit(read: (path: string) => string = (p) => readFileSync(p, 'utf8')): number | undefined {
  for (const path of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    let text: string;
    try {
      text = read(path).trim();
    } catch {
      continue;
    }
    const n = Number(text);
    // "max" (v2) or a huge number (v1's "no limit") mean unlimited
    if (Number.isSafeInteger(n) && n > 0 && n < 2 ** 60) return n;
    return undefined;
  }
  return undefined;
}

/** What a job worker may use here: the setting when given, else the host's memory or the cgroup's limit, whichever is lower. */
export function agentMemoryLimit(setting?: number): number {
  if (setting) return setting;
  const cg = cgroupMemoryLimit();
  return cg ? Math.min(cg, totalmem()) : totalmem();
}

const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/** Refused when the sweep would need more than `limit`: thrown as the job's failure, naming the agent. */
export class JobMemoryError extends Error {
  override name = 'JobMemoryError';
  readonly code = 'JOB_TOO_LARGE';
}

/** Throws JobMemoryError when the sweep needs more than this agent may give a job worker. */
export function checkWorkerMemory(agent: string, sweep: Pick<JobSweep, 'op' | 'dtype' | 'sizes'>, nranks: number, limit: number): void {
  const need = sweepWorkerBytes(sweep, nranks);
  if (need <= limit) return;
  const largest = Math.max(...sweep.sizes);
  throw new JobMemoryError(
    `agent ${agent} cannot run this job: its largest size (${largest} bytes of ${sweep.op}, ${sweep.dtype}) needs about ${gib(need)} in the job worker, ` +
      `more than the ${gib(limit)} this agent allows (its memory or cgroup limit, or CMESH_JOB_MEMORY_BYTES)`,
  );
}
