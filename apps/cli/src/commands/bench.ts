// `cmesh bench`: nccl-tests-style sweeps over the CPU data plane, run by -np local ranks.
import { BenchRow } from '@cmesh/protocol';
import { Command } from 'commander';
import { runLocalBench } from '../bench/local-runner';
import { BenchCliOptions, sweepsFromCli } from '../bench/options';
import { BenchRankInfo, benchSummary, formatFooter, formatHeader, formatPreamble, formatRow } from '@cmesh/bench';
import { MeshBenchOptions, addMeshOptions, runMeshBench } from '../mesh/mesh-bench';

interface Opts extends BenchCliOptions {
  json?: boolean;
  algorithm?: string;
}

export function register(program: Command): void {
  const cmd = addMeshOptions(program.command('bench'))
    .description('nccl-tests-style collective sweeps: size, count, time, algbw, busbw, #wrong')
    .option('-b, --minbytes <size>', 'smallest size (accepts K, M, G)', '8')
    .option('-e, --maxbytes <size>', 'largest size (accepts K, M, G)', '32M')
    .option('-f, --stepfactor <factor>', 'multiply the size by this each step', '2')
    .option('-i, --stepbytes <size>', 'add this many bytes each step instead of -f')
    .option('-n, --iters <n>', 'timed iterations per size', '20')
    .option('-w, --warmup_iters <n>', 'untimed warm-up iterations per size', '5')
    .option('-c, --check <0|1>', 'verify every result element', '1')
    .option('-o, --redop <op>', 'reduction: sum, prod, min, max, avg', 'sum')
    .option('-d, --datatype <type>', 'float, double, int8, uint8, int32, int64, half, bfloat16', 'float')
    .option('-r, --root <rank>', 'root of rooted collectives', '0')
    .option('--np <n>', 'number of local ranks (also -np)', '2')
    .option('--op <collective>', 'collective(s), comma separated, or all', 'all_reduce')
    .option('--algorithm <name>', 'force an algorithm (CMESH_ALGO) instead of the cost model')
    .option('--timeout <ms>', 'per-call timeout in milliseconds', '120000')
    .option('--json', 'print one JSON document instead of the table')
    .action(async (o: Opts & MeshBenchOptions, c: Command) => {
      const write = (s: string) => process.stdout.write(s);
      const failed = o.mesh ? (await runMeshBench({ ...o, npGiven: c.getOptionValueSource('np') !== 'default' }, write)).failed : await runBench(o, write);
      if (failed) process.exitCode = 1;
    });
  // nccl-tests and mpirun spell the rank count `-np`, which commander would read as `-n p`.
  const parseOptions = cmd.parseOptions.bind(cmd);
  cmd.parseOptions = (argv: string[]) => parseOptions(argv.map((a) => (a === '-np' ? '--np' : a.startsWith('-np=') ? `--np=${a.slice(4)}` : a)));
}

/** Runs every requested sweep and writes the tables (or JSON). Returns true when any element was wrong. */
export async function runBench(o: Opts, write: (s: string) => void): Promise<boolean> {
  const { np, sweeps, minBytes, maxBytes, step } = sweepsFromCli(o);
  const env = o.algorithm ? { CMESH_ALGO: o.algorithm } : undefined;
  const results: { op: string; ranks: BenchRankInfo[]; rows: BenchRow[] }[] = [];
  let wrong = 0;
  for (const sweep of sweeps) {
    const preamble = (ranks: BenchRankInfo[]) => ({ backend: 'tcp', nranks: np, sweep, minBytes, maxBytes, step, ranks });
    const { ranks, rows } = await runLocalBench({
      np,
      sweep,
      env,
      onRanks: o.json ? undefined : (r) => write([...formatPreamble(preamble(r)), ...formatHeader()].join('\n') + '\n'),
      onRow: o.json ? undefined : (row) => write(formatRow(row) + '\n'),
    });
    if (!o.json) write(formatFooter(rows).join('\n') + '\n');
    wrong += benchSummary(rows).wrong;
    results.push({ op: sweep.op, ranks, rows });
  }
  if (o.json) {
    write(
      JSON.stringify(
        { nranks: np, minBytes, maxBytes, step, results: results.map((r) => ({ ...r, ...benchSummary(r.rows) })) },
        null,
        2,
      ) + '\n',
    );
  }
  return wrong > 0;
}
