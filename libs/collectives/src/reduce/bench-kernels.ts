// Reduction kernel throughput, TypeScript vs native, per dtype and size:
//   node -r @swc-node/register libs/collectives/src/reduce/bench-kernels.ts [64M 4K ...] [--baseline file.ts] [--crossover]
// GB/s is bytes of one buffer per second; r+w counts what the kernel touches (read dst + read src +
// write dst = 3x). --baseline also times another module's reduceInto/finishAvg (e.g. an older
// kernels.ts). --crossover prints, per dtype, the time per call of both paths at small sizes.
import { resolve } from 'path';
import { ReduceOp } from '../reduce-op';
import { DType, Tensor, allocTensor, elementSize } from '../tensor/dtype';
import { finishAvg, reduceInto, setKernelMode } from './kernels';
import { loadNative } from './native';

type ReduceFn = (d: Tensor, s: Tensor, op: ReduceOp) => void;
type AvgFn = (t: Tensor, w: number) => void;

function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)i?B?$/i.exec(s);
  if (!m) throw new Error(`bad size ${s}; use e.g. 4K or 64M`);
  return Math.round(Number(m[1]) * { '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 }[m[2].toUpperCase() as '' | 'K' | 'M' | 'G']);
}

function fmtSize(b: number): string {
  return b >= 2 ** 20 ? `${b / 2 ** 20} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`;
}

function operands(dtype: DType, bytes: number): [Tensor, Tensor] {
  const n = Math.max(1, Math.floor(bytes / elementSize(dtype)));
  const d = allocTensor(dtype, n);
  const s = allocTensor(dtype, n);
  // ones: sums and products stay normal numbers (no subnormal slow paths) however often repeated
  if (dtype === 'int64') (s as BigInt64Array).fill(1n);
  else if (dtype === 'float16') (s as Uint16Array).fill(0x3c00);
  else if (dtype === 'bfloat16') (s as Uint16Array).fill(0x3f80);
  else (s as Float32Array).fill(1);
  return [d, s];
}

/** Median seconds per call; repeats each timed batch until it lasts >= 2 ms. */
function timeCall(fn: () => void, bytes: number): number {
  fn();
  fn(); // warm-up: compile, page in
  let reps = 1;
  if (bytes < 2 ** 20) {
    for (;;) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < reps; i++) fn();
      if (Number(process.hrtime.bigint() - t0) > 2e6) break;
      reps *= 2;
    }
  }
  const batches = bytes >= 2 ** 24 ? 5 : 9;
  const times: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < reps; i++) fn();
    times.push(Number(process.hrtime.bigint() - t0) / 1e9 / reps);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const CASES: [DType, ReduceOp | 'finishAvg'][] = [
  ['float32', 'sum'],
  ['float32', 'max'],
  ['float64', 'sum'],
  ['int8', 'sum'],
  ['int8', 'bxor'],
  ['uint8', 'max'],
  ['int32', 'sum'],
  ['int32', 'product'],
  ['int64', 'sum'],
  ['int64', 'product'],
  ['float16', 'sum'],
  ['float16', 'max'],
  ['bfloat16', 'sum'],
  ['float32', 'finishAvg'],
  ['float16', 'finishAvg'],
];

function main(): void {
  const args = process.argv.slice(2);
  const bi = args.indexOf('--baseline');
  let baseline: { reduceInto: ReduceFn; finishAvg: AvgFn } | undefined;
  if (bi >= 0) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    baseline = require(resolve(args[bi + 1]));
    args.splice(bi, 2);
  }
  const crossover = args.includes('--crossover');
  const sizes = args.filter((a) => !a.startsWith('--')).map(parseSize);
  const addon = loadNative();
  const paths: [string, ReduceFn, AvgFn, (() => void) | undefined][] = [];
  if (baseline) paths.push(['before', baseline.reduceInto, baseline.finishAvg, () => setKernelMode('js')]);
  paths.push(['js', reduceInto, finishAvg, () => setKernelMode('js')]);
  if (addon) paths.push([`native(${addon.isa})`, reduceInto, finishAvg, () => setKernelMode('native')]);

  if (crossover) {
    console.log('dtype     op        size     ' + paths.map(([name]) => name.padStart(16)).join('') + '   (ns per call)');
    for (const [dtype, op] of CASES) {
      if (op === 'finishAvg') continue;
      for (const bytes of [16, 64, 128, 256, 512, 1024, 4096]) {
        const [d, s] = operands(dtype, bytes);
        const cells = paths.map(([, red, , setup]) => {
          setup?.();
          return (timeCall(() => red(d, s, op), bytes) * 1e9).toFixed(0).padStart(16);
        });
        console.log(`${dtype.padEnd(9)} ${op.padEnd(9)} ${fmtSize(bytes).padEnd(8)} ${cells.join('')}`);
      }
    }
    return;
  }

  for (const bytes of sizes.length ? sizes : [64 * 2 ** 20, 4096]) {
    console.log(`\n${fmtSize(bytes)}: GB/s of buffer (r+w = 3x)`);
    console.log('dtype     op        ' + paths.map(([name]) => name.padStart(24)).join(''));
    for (const [dtype, op] of CASES) {
      const [d, s] = operands(dtype, bytes);
      const cells = paths.map(([, red, avg, setup]) => {
        setup?.();
        const sec = op === 'finishAvg' ? timeCall(() => avg(d, 1), bytes) : timeCall(() => red(d, s, op), bytes);
        const gbs = d.byteLength / sec / 1e9;
        return `${gbs.toFixed(2).padStart(9)} (${(3 * gbs).toFixed(1).padStart(5)} r+w)`.padStart(24);
      });
      console.log(`${dtype.padEnd(9)} ${op.padEnd(9)} ${cells.join('')}`);
    }
  }
}

main();
