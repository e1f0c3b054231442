// GPU check, the library side: initProcessGroup({ backend: 'nccl' }) in user processes, as a
// program of one's own would call it, one process per rank (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, LOCAL_RANK set as torchrun sets them), each running the test suite's nccl scenario
// (every collective x dtype x NCCL reduce op at sizes 0, 1, 7 and 1001, groups, send/recv, async
// ops, capability errors; element by element) on the real CUDA runtime and NCCL.
//   --world N          ranks, one GPU each (LOCAL_RANK = rank)
//   --same-device      every rank on GPU 0: NCCL refuses two ranks of a communicator on one
//                      device; every rank must end with a typed error, none may hang
// Usage: node -r @swc-node/register scripts/gpu-check/library-nccl.ts --world 1
import { spawn } from 'child_process';
import { freePort, runNcclScenario } from '@cmesh/testing';

const RANK_TIMEOUT_MS = 120_000;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

interface RankOutcome {
  rank: number;
  ms: number;
  code: number | null;
  result?: Record<string, unknown>;
  error?: { name: string; message: string };
  stderr: string;
  /** lines of NCCL's own log (NCCL_DEBUG) that reached the rank's stderr */
  ncclLogLines: number;
}

/** One rank: this script again with --rank, its last stdout line the JSON outcome. */
function spawnRank(rank: number, env: NodeJS.ProcessEnv): Promise<RankOutcome> {
  const started = Date.now();
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1], '--rank', String(rank)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), RANK_TIMEOUT_MS);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(killer);
      const last = stdout.trim().split('\n').pop() ?? '';
      let parsed: Partial<RankOutcome> = {};
      try {
        parsed = JSON.parse(last);
      } catch {
        parsed = { error: { name: 'NoResult', message: code === null ? `killed after ${RANK_TIMEOUT_MS} ms (hung)` : `exited ${code} without a result` } };
      }
      resolve({
        rank,
        ms: Date.now() - started,
        code,
        stderr: stderr.slice(-1500),
        ncclLogLines: stderr.split('\n').filter((l) => / NCCL (INFO|WARN) /.test(l)).length,
        ...parsed,
      });
    }),
  );
}

async function rankMain(): Promise<void> {
  const out = await runNcclScenario(null).then(
    (result) => ({ result }),
    (e: Error) => ({ error: { name: e.name, message: e.message } }),
  );
  process.stdout.write(`\n${JSON.stringify(out)}\n`);
  process.exit(0);
}

async function main(): Promise<number> {
  const world = Number(arg('world') ?? '1');
  const sameDevice = process.argv.includes('--same-device');
  const port = await freePort();
  const outcomes = await Promise.all(
    Array.from({ length: world }, (_, rank) =>
      spawnRank(rank, {
        ...process.env,
        RANK: String(rank),
        WORLD_SIZE: String(world),
        LOCAL_RANK: String(sameDevice ? 0 : rank),
        LOCAL_WORLD_SIZE: String(world),
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(port),
      }),
    ),
  );
  let failed = false;
  for (const o of outcomes) {
    if (sameDevice) {
      // the wanted outcome: a typed error, promptly, on every rank
      const ok = !!o.error && o.error.name !== 'NoResult' && o.ms < RANK_TIMEOUT_MS;
      failed ||= !ok;
      console.log(
        `rank ${o.rank} (GPU 0): ${o.error ? `${o.error.name}: ${o.error.message}` : 'no error'} after ${o.ms} ms${ok ? '' : '  <- expected a typed error'}`,
      );
      continue;
    }
    const r = o.result as { checks?: number; failures?: string[]; backend?: string } | undefined;
    if (!r) {
      failed = true;
      console.log(`rank ${o.rank}: ${o.error?.name}: ${o.error?.message} (after ${o.ms} ms)\n${o.stderr}`);
      continue;
    }
    const failures = r.failures ?? [];
    failed ||= failures.length > 0 || !(r.checks! > 300) || r.backend !== 'nccl';
    console.log(`rank ${o.rank}: backend ${r.backend}, ${r.checks} checks, ${failures.length} wrong, ${o.ms} ms`);
    if (process.env.NCCL_DEBUG === 'INFO') {
      // NCCL's log must reach the rank's stderr: the first thing anyone reads on a failed run
      failed ||= o.ncclLogLines === 0;
      console.log(`  NCCL_DEBUG=INFO: ${o.ncclLogLines} lines of NCCL's log on the rank's stderr${o.ncclLogLines ? '' : '  <- expected some'}`);
    }
    for (const f of failures) console.log(`  ${f}`);
    for (const k of ['bitwise', 'anySource', 'algorithm']) console.log(`  refused as expected: ${String((r as Record<string, unknown>)[k]).slice(0, 110)}`);
  }
  return failed ? 1 : 0;
}

if (arg('rank') !== undefined) void rankMain();
else
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
