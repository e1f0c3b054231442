// `cmesh bench` on the command line with nccl-tests' flags and meanings: the collective as the
// argument (nccl-tests' binary) or --coll, -o the reduction (all: every one), -d the type (all),
// -T seconds; one nccl-tests table per collective; usage errors exit 2 with a message saying what
// to write instead.
import { spawnSync } from 'child_process';
import { join } from 'path';

const CMESH = join(__dirname, '../bin/cmesh.js');
const bench = (args: string[]) => spawnSync(process.execPath, [CMESH, 'bench', ...args], { encoding: 'utf8', timeout: 120_000 });
const dataRows = (out: string) =>
  out
    .split('\n')
    .filter((l) => /^\s+\d+\s+\d+\s+\S+/.test(l))
    .map((l) => l.trim().split(/\s+/));
const SMALL = ['-b', '64', '-e', '64', '-n', '1', '-w', '0', '-T', '60'];

describe('cmesh bench, nccl-tests flags', () => {
  it('all_reduce -o all -d float,int8: one table, every type and reduction (no avg for an integer type), 0 wrong', () => {
    const r = bench(['all_reduce', '-o', 'all', '-d', 'float,int8', ...SMALL]);
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout.match(/^# Collective test starting: all_reduce_perf/gm)).toHaveLength(1);
    expect(r.stdout).toMatch(/^# op: all_reduce type: float,int8 redop: sum,prod,min,max,avg root: 0 /m);
    expect(dataRows(r.stdout).map((c) => `${c[2]}/${c[3]}`)).toEqual([
      'float/sum',
      'float/prod',
      'float/min',
      'float/max',
      'float/avg',
      'int8/sum',
      'int8/prod',
      'int8/min',
      'int8/max',
    ]);
    for (const c of dataRows(r.stdout)) expect([c[8], c[12]]).toEqual(['0', '0']);
    expect(r.stdout.match(/^# Out of bounds values : 0 OK$/gm)).toHaveLength(1);
  }, 150_000);

  it('--coll names the collective(s) as the argument does; -o prod -d double', () => {
    const r = bench(['--coll', 'reduce_scatter,all_gather', '-o', 'prod', '-d', 'double', '--json', ...SMALL]);
    expect(r.status).toBe(0);
    const doc = JSON.parse(r.stdout) as { results: { op: string; dtype: string; redop: string; wrong: number; rows: { redop: string }[] }[] };
    expect(doc.results.map((x) => [x.op, x.dtype, x.rows[0].redop, x.wrong])).toEqual([
      ['reduceScatter', 'float64', 'product', 0],
      ['allGather', 'float64', 'none', 0],
    ]);
  }, 150_000);

  it('usage errors exit 2 and say what to write', () => {
    const asCollective = bench(['--op', 'all_reduce']);
    expect(asCollective.status).toBe(2);
    expect(asCollective.stderr).toContain(
      '-o/--op is the reduction (sum, prod, min, max, avg or all), as in nccl-tests; name the collective as the argument (cmesh bench all_reduce) or with --coll all_reduce',
    );
    const twice = bench(['broadcast', '--coll', 'reduce']);
    expect([twice.status, twice.stderr]).toEqual([2, 'cmesh: the collective is named twice: broadcast and --coll reduce\n']);
    const type = bench(['-d', 'fp8']);
    expect(type.status).toBe(2);
    expect(type.stderr).toMatch(/unknown datatype "fp8"; expected one of float, double, int8, uint8, int32, int64, half, bfloat16 or all/);
    const avg = bench(['-o', 'avg', '-d', 'int32']);
    expect([avg.status, avg.stderr]).toEqual([2, 'cmesh: -o avg needs a floating-point datatype (half, float, double, bfloat16), got -d int32\n']);
    const unknown = bench(['--no-such-flag']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option '--no-such-flag'/);
    // nccl-tests' flags with no meaning here say why
    const gpus = bench(['-g', '8']);
    expect([gpus.status, gpus.stderr]).toEqual([
      2,
      'cmesh: -g, --ngpus (an nccl-tests flag) has no meaning for cmesh bench: one rank per process; -np sets the ranks\n',
    ]);
    expect(bench(['--blocking=0']).stderr).toMatch(/^cmesh: -z, --blocking \(an nccl-tests flag\)/);
    expect(bench(['--help']).status).toBe(0);
  }, 60_000);
});
