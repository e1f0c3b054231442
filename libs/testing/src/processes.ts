// Waiting on and finding the processes a test started.
import { readdirSync, readFileSync } from 'fs';

export function isAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** User + system CPU seconds a process has used so far, from /proc (Linux); throws once it is gone. */
export function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/**
 * Polls `probe` every `intervalMs` until it gives something other than undefined or false, and
 * resolves with that; a probe that throws counts as not yet (its last message is kept for the
 * error). Throws naming `what` after `timeoutMs`.
 */
export async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (${last})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A test's descendant processes wherever they were reparented: each carries a marker in its
 * environment (CMESH_TEST_MARK), and /proc shows who still has it.
 */
export function markedPids(marker: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/environ`, 'latin1').includes(`CMESH_TEST_MARK=${marker}`)) out.push(Number(d));
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}

/** Lines of a process's output that say it crashed or let a rejection or exception escape. */
export function crashLines(output: readonly string[]): string[] {
  return output.filter((l) => /unhandled ?rejection|uncaught ?exception|FATAL ERROR|heap out of memory/i.test(l));
}
