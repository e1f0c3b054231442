// Shared-memory transport checks, one rank's side:
//   check: init, all-reduce a few sizes (results checked), report the shared mappings this
//          process holds (a memfd segment shows in /proc/self/maps as /memfd:cmesh-shm)
//   stop:  rank 1 stops itself (SIGSTOP) during an all-reduce loop; the others report their error
//   rss:   RSS (anonymous and shared) every tenth of `calls` small all-reduces, after a warm-up
//          that has cycled the rings
import { readFileSync } from 'fs';
import * as dist from '../../../src';

/** RssAnon, RssFile and RssShmem from /proc/self/status, in bytes. */
function rss(): Record<string, number> {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { anon: kb('RssAnon'), file: kb('RssFile'), shmem: kb('RssShmem') };
}

function shmMappings(): number {
  return readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter((l) => l.includes('/memfd:cmesh-shm')).length;
}

export async function run(args: { mode: 'check' | 'stop' | 'rss'; calls?: number; warmup?: number }): Promise<Record<string, unknown>> {
  const started = Date.now();
  const report = (err: dist.CmeshError) => ({ name: err.name, message: err.message, context: err.context, afterMs: Date.now() - started });
  try {
    await dist.initProcessGroup({ timeout: 20000 });
  } catch (e) {
    return report(e as dist.CmeshError);
  }
  const rank = dist.getRank();
  const P = dist.getWorldSize();
  try {
    if (args.mode === 'check') {
      const wrong: string[] = [];
      // past the 4 MiB ring: such a message goes through the ring in pieces
      for (const n of [1, 1000, 1 << 16, 3 << 20]) {
        const t = new Float64Array(n).map((_, i) => rank * n + i);
        await dist.allReduce(t);
        for (let i = 0; i < n; i++) {
          const want = (P * (P - 1) * n) / 2 + P * i;
          if (t[i] !== want) {
            wrong.push(`n=${n} [${i}]: ${t[i]} != ${want}`);
            break;
          }
        }
      }
      return { ok: true, wrong, mappings: shmMappings() };
    }
    if (args.mode === 'stop') {
      const t = new Float32Array(1024).fill(1);
      let failed: Record<string, unknown> | undefined;
      for (let i = 0; i < 200 && !failed; i++) {
        if (rank === 1 && i === 3) process.kill(process.pid, 'SIGSTOP');
        const t0 = Date.now();
        await dist.allReduce(t, { timeout: 1500 }).catch((e: dist.CmeshError) => {
          failed = { ...report(e), opMs: Date.now() - t0 };
        });
      }
      // stay up, so that this rank's exit is no peer failure for a rank still waiting for its timeout
      await new Promise((r) => setTimeout(r, 3000));
      return failed ?? { ok: true };
    }
    const calls = args.calls ?? 100000;
    const t = new Float32Array(2);
    await dist.allReduce(new Float32Array(4 << 20)); // every ring wrapped at least once
    for (let i = 0; i < (args.warmup ?? 50000); i++) await dist.allReduce(t); // V8 sizes its heap for this load first
    const sample = () => {
      global.gc?.();
      const r = rss();
      return r.anon + r.shmem;
    };
    const before = sample();
    // a sample every tenth: a leak grows steadily, a compiler zone freed late is one sample's spike
    const samples: number[] = [];
    for (let i = 1; i <= calls; i++) {
      await dist.allReduce(t);
      if (i % (calls / 10) === 0) samples.push(sample() - before);
    }
    await dist.destroyProcessGroup();
    return { ok: true, samples, mappings: shmMappings() };
  } catch (e) {
    return report(e as dist.CmeshError);
  }
}
