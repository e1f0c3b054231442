// `cmesh bench [collective]`: nccl-tests-style sweeps over the CPU data plane, run by -np local
// ranks (or, with --mesh, as jobs on a running mesh). The collective is the argument (nccl-tests'
// binary: all_reduce_perf -> `cmesh bench all_reduce`) or --coll; the flags mean what they mean
// in nccl-tests (-o the reduction, -d the type, -T seconds).
import { BenchRow } from '@cmesh/protocol';
import { Command } from 'commander';
import { runLocalBench } from '../bench/local-runner';
import { UsageError } from '../usage';
import { BenchCliOptions, byCollective, sweepsFromCli } from '../bench/options';
import { BenchRankInfo, benchSummary, formatFooter, formatHeader, formatPreamble, formatRow } from '@cmesh/bench';
import { MeshBenchOptions, addMeshOptions, runMeshBench } from '../mesh/mesh-bench';

interface Opts extends BenchCliOptions {
  json?: boolean;
  algorithm?: string;
}

export const DEFAULT_COLLECTIVE = 'all_reduce';

/** nccl-tests' flags that mean nothing on this data plane: refused saying why, not as unknown. */
const NCCL_TESTS_ONLY: Record<string, [string, string]> = {
  '-t': ['--nthreads', 'one rank per process; -np sets the ranks'],
  '-g': ['--ngpus', 'one rank per process; -np sets the ranks'],
  '-m': ['--agg_iters', 'each timed iteration is one call'],
  '-N': ['--run_cycles', 'one run; run the command again'],
  '-p': ['--parallel_init', 'ranks always initialise in parallel'],
  '-z': ['--blocking', 'calls always return when complete'],
  '-y': ['--stream_null', 'no CUDA streams on the CPU data plane'],
  '-G': ['--cudagraph', 'no CUDA graphs on the CPU data plane'],
  '-C': ['--report_cputime', 'times are wall-clock'],
  '-a': ['--average', 'the time is the median over iterations of the slowest rank'],
  '-R': ['--local_register', 'no buffer registration on the CPU data plane'],
};

/** Refuses nccl-tests' flags cmesh bench has no use for, with the reason. */
export function refuseNcclTestsOnly(argv: readonly string[]): void {
  for (const a of argv) {
    const flag = a.split('=')[0];
    // -g, --ngpus, --ngpus=8, and the value glued on as nccl-tests' getopt takes it: -g8
    const entry = Object.entries(NCCL_TESTS_ONLY).find(
      ([short, [long]]) => flag === long || flag === short || (!flag.startsWith('--') && flag.startsWith(short)),
    );
    if (entry) throw new UsageError(`${entry[0]}, ${entry[1][0]} (an nccl-tests flag) has no meaning for cmesh bench: ${entry[1][1]}`);
  }
}

export function register(program: Command): void {
  const cmd = addMeshOptions(program.command('bench'))
    .argument('[collective]', `collective(s), nccl-tests' names, comma separated, or all (default ${DEFAULT_COLLECTIVE})`)
    .description('nccl-tests-style collective sweeps: size, count, time, algbw, busbw, #wrong')
    .option('--coll <collective>', 'the collective(s), as the argument')
    .option('-b, --minbytes <size>', 'smallest size (accepts K, M, G)', '8')
    .option('-e, --maxbytes <size>', 'largest size (accepts K, M, G)', '32M')
    .option('-f, --stepfactor <factor>', 'multiply the size by this each step', '2')
    .option('-i, --stepbytes <size>', 'add this many bytes each step instead of -f')
    .option('-n, --iters <n>', 'timed iterations per size', '20')
    .option('-w, --warmup_iters <n>', 'untimed warm-up iterations per size', '5')
    .option('-c, --check <0|1>', 'verify every result element', '1')
    .option('-o, --op <op>', 'reduction: sum, prod, min, max, avg, a comma list, or all', 'sum')
    .option('-d, --datatype <type>', 'float, double, int8, uint8, int32, int64, half, bfloat16, a comma list, or all', 'float')
    .option('-r, --root <rank>', 'root of rooted collectives', '0')
    .option('-T, --timeout <seconds>', 'per-call timeout in seconds (0: none)', '120')
    .option('--np <n>', 'number of local ranks (also -np)', '2')
    .option('--algorithm <name>', 'force an algorithm (CMESH_ALGO) instead of the cost model')
    .option('--json', 'print one JSON document instead of the table')
    .action(async (collective: string | undefined, o: Opts & MeshBenchOptions & { coll?: string }, c: Command) => {
      if (collective && o.coll && collective !== o.coll) throw new UsageError(`the collective is named twice: ${collective} and --coll ${o.coll}`);
      o.coll = collective ?? o.coll ?? DEFAULT_COLLECTIVE;
      const write = (s: string) => process.stdout.write(s);
      const failed = o.mesh ? (await runMeshBench({ ...o, npGiven: c.getOptionValueSource('np') !== 'default' }, write)).failed : await runBench(o, write);
      if (failed) process.exitCode = 1;
    });
  // nccl-tests and mpirun spell the rank count `-np`, which commander would read as `-n p`.
  const parseOptions = cmd.parseOptions.bind(cmd);
  cmd.parseOptions = (argv: string[]) => {
    const args = argv.map((a) => (a === '-np' ? '--np' : a.startsWith('-np=') ? `--np=${a.slice(4)}` : a));
    refuseNcclTestsOnly(args);
    return parseOptions(args);
  };
}

/** Runs every requested sweep and writes one table per collective (or JSON). Returns true when any element was wrong. */
export async function runBench(o: Opts, write: (s: string) => void): Promise<boolean> {
  const { np, sweeps, minBytes, maxBytes, step } = sweepsFromCli(o);
  const env = o.algorithm ? { CMESH_ALGO: o.algorithm } : undefined;
  const results: { op: string; dtype: string; redop: string; ranks: BenchRankInfo[]; rows: BenchRow[] }[] = [];
  let wrong = 0;
  for (const group of byCollective(sweeps)) {
    const dtypes = [...new Set(group.map((s) => s.dtype))];
    const redops = [...new Set(group.map((s) => s.redop))];
    const preamble = (ranks: BenchRankInfo[]) => ({ backend: 'tcp', nranks: np, sweep: group[0], minBytes, maxBytes, step, ranks, dtypes, redops });
    const { ranks, rows } = await runLocalBench({
      np,
      sweeps: group,
      env,
      onRanks: o.json ? undefined : (r) => write([...formatPreamble(preamble(r)), ...formatHeader()].join('\n') + '\n'),
      onRow: o.json ? undefined : (row) => write(formatRow(row) + '\n'),
    });
    if (!o.json) write(formatFooter(rows).join('\n') + '\n');
    wrong += benchSummary(rows).wrong;
    for (const s of group) {
      const own = rows.filter((r) => r.type === s.dtype && (r.redop === s.redop || r.redop === 'none'));
      results.push({ op: s.op, dtype: s.dtype, redop: s.redop, ranks, rows: own });
    }
  }
  if (o.json) {
    write(JSON.stringify({ nranks: np, minBytes, maxBytes, step, results: results.map((r) => ({ ...r, ...benchSummary(r.rows) })) }, null, 2) + '\n');
  }
  return wrong > 0;
}
