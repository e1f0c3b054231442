// Every algorithm, over the library's data plane (Mesh and OpComm over TCP) between in-process ranks, at world sizes 1..5 and 8,
// element counts 0, 1, P-1, 7 and 1000, checked element by element against a reference, plus the
// seed's traffic formulas checked through the byte counters.
import { ALGORITHMS, Scratch, algorithmNames } from '../src/algorithms';
import { treeChildren } from '../src/algorithms/allreduce/tree';
import { ReduceOp } from '../src/reduce-op';
import { DType, Tensor, allocTensor, bytesOf, elementSize } from '../src/tensor/dtype';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../src/tensor/half';
import { CountingComm, MeshComms } from './support/mesh-comms';

const SIZES = [1, 2, 3, 4, 5, 8];
const meshes = new Map<number, MeshComms>();
const scratches = Array.from({ length: 8 }, () => new Scratch());

beforeAll(async () => {
  for (const p of SIZES) meshes.set(p, await MeshComms.create(p));
});

afterAll(async () => {
  for (const m of meshes.values()) await m.close();
});

/** Runs fn on every rank at once; fails instead of hanging. */
async function onAllRanks(p: number, fn: (comm: CountingComm, rank: number) => Promise<void>): Promise<void> {
  const comms = meshes.get(p)!.nextOp();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`ranks did not finish within 10 s (P=${p})`)), 10_000);
  });
  try {
    await Promise.race([Promise.all(comms.map((c, r) => fn(c, r))), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- values and reference reductions -------------------------------------------------------

function value(dtype: DType, rank: number, i: number): number {
  const v = (rank * 7 + i * 3 + 1) % 5; // 0..4: exact in every dtype, small products
  return dtype === 'uint8' ? v : v - 1;
}

function setNum(dtype: DType, t: Tensor, i: number, v: number | bigint): void {
  if (dtype === 'float16') (t as Uint16Array)[i] = f32ToF16Bits(Number(v));
  else if (dtype === 'bfloat16') (t as Uint16Array)[i] = f32ToBf16Bits(Number(v));
  else if (dtype === 'int64') (t as BigInt64Array)[i] = BigInt(v);
  else (t as Float64Array)[i] = Number(v);
}

function getNum(dtype: DType, t: Tensor, i: number): number | bigint {
  if (dtype === 'float16') return f16BitsToF32((t as Uint16Array)[i]);
  if (dtype === 'bfloat16') return bf16BitsToF32((t as Uint16Array)[i]);
  return (t as Float64Array)[i];
}

function input(dtype: DType, rank: number, count: number, offset = 0): Tensor {
  const t = allocTensor(dtype, count);
  for (let i = 0; i < count; i++) setNum(dtype, t, i, value(dtype, rank, i + offset));
  return t;
}

const INT_BITS: Partial<Record<DType, [number, boolean]>> = { int8: [8, true], uint8: [8, false], int32: [32, true], int64: [64, true] };

function roundTo(dtype: DType, x: number): number {
  if (dtype === 'float32') return Math.fround(x);
  if (dtype === 'float16') return f16BitsToF32(f32ToF16Bits(x));
  if (dtype === 'bfloat16') return bf16BitsToF32(f32ToBf16Bits(x));
  return x;
}

/** op over ranks 0..p-1 of value(rank, i + offset) */
function expected(dtype: DType, op: ReduceOp, p: number, i: number): number | bigint {
  const bits = INT_BITS[dtype];
  if (bits) {
    let acc = BigInt(value(dtype, 0, i));
    for (let r = 1; r < p; r++) {
      const v = BigInt(value(dtype, r, i));
      acc =
        op === 'sum'
          ? acc + v
          : op === 'product'
            ? acc * v
            : op === 'min'
              ? v < acc
                ? v
                : acc
              : op === 'max'
                ? v > acc
                  ? v
                  : acc
                : op === 'band'
                  ? acc & v
                  : op === 'bor'
                    ? acc | v
                    : acc ^ v;
    }
    const w = bits[1] ? BigInt.asIntN(bits[0], acc) : BigInt.asUintN(bits[0], acc);
    return dtype === 'int64' ? w : Number(w);
  }
  let acc = value(dtype, 0, i);
  for (let r = 1; r < p; r++) {
    const v = value(dtype, r, i);
    acc = op === 'sum' || op === 'avg' ? acc + v : op === 'product' ? acc * v : op === 'min' ? Math.min(acc, v) : Math.max(acc, v);
  }
  return op === 'avg' ? roundTo(dtype, Math.fround(acc / p)) : roundTo(dtype, acc);
}

function checkReduced(dtype: DType, op: ReduceOp, p: number, t: Tensor, what: string, offset = 0): void {
  for (let i = 0; i < t.length; i++) {
    const got = getNum(dtype, t, i);
    const want = expected(dtype, op, p, i + offset);
    if (got !== want) throw new Error(`${what}: element ${i} is ${got}, want ${want}`);
  }
}

function countsFor(p: number): number[] {
  return [...new Set([0, 1, Math.max(0, p - 1), 7, 1000])];
}

// ---- all-reduce -----------------------------------------------------------------------------

describe('allreduce', () => {
  for (const name of algorithmNames('allReduce')) {
    const algo = ALGORITHMS.allReduce[name];
    for (const p of SIZES) {
      it(`${name} P=${p}: float32 SUM, counts ${countsFor(p).join('/')}, small chunks too`, async () => {
        for (const count of countsFor(p)) {
          for (const chunkBytes of [undefined, 64]) {
            const data = Array.from({ length: p }, (_, r) => input('float32', r, count));
            await onAllRanks(p, (c, r) => algo.run(c, data[r], 'sum', scratches[r], { chunkBytes }));
            data.forEach((t, r) => checkReduced('float32', 'sum', p, t, `${name} P=${p} n=${count} rank ${r}`));
            if (algo.traffic) {
              const comms = meshes.get(p)!.comms;
              comms.forEach((c, r) => {
                const want = algo.traffic!(count, 4, p, r);
                expect({ rank: r, sent: c.bytesSent, received: c.bytesReceived }).toEqual({ rank: r, ...want });
              });
            }
          }
        }
      });
    }
    const combos: [DType, ReduceOp][] = [
      ['int32', 'product'],
      ['int8', 'sum'],
      ['uint8', 'max'],
      ['float64', 'min'],
      ['int64', 'bxor'],
      ['int32', 'band'],
      ['float16', 'sum'],
      ['bfloat16', 'avg'],
      ['float32', 'avg'],
    ];
    for (const p of [3, 4]) {
      it(`${name} P=${p}: dtypes x ops`, async () => {
        for (const [dtype, op] of combos) {
          for (const count of [7, 1000]) {
            const data = Array.from({ length: p }, (_, r) => input(dtype, r, count));
            await onAllRanks(p, (c, r) => algo.run(c, data[r], op, scratches[r], { chunkBytes: 256 }));
            data.forEach((t, r) => checkReduced(dtype, op, p, t, `${name} ${dtype} ${op} P=${p} rank ${r}`));
          }
        }
      });
    }
  }

  it("seed's traffic formulas: master-worker (P-1)·N at the root, ring 2·(N/P)·(P-1), tree log2(P)·N along a root path", async () => {
    for (const p of [2, 3, 4, 5, 8]) {
      const count = 840; // divisible by 2..8
      const N = count * 4;
      const comms = meshes.get(p)!.comms;
      const data = () => Array.from({ length: p }, (_, r) => input('float32', r, count));

      const d1 = data();
      await onAllRanks(p, (c, r) => ALGORITHMS.allReduce.direct.run(c, d1[r], 'sum', scratches[r]));
      expect(comms[0].bytesSent).toBe((p - 1) * N);
      expect(comms[0].bytesReceived).toBe((p - 1) * N);
      for (let r = 1; r < p; r++) expect(comms[r].bytesSent).toBe(N);

      const d2 = data();
      await onAllRanks(p, (c, r) => ALGORITHMS.allReduce.ring.run(c, d2[r], 'sum', scratches[r]));
      for (const c of comms) {
        expect(c.bytesSent).toBe(2 * (N / p) * (p - 1));
        expect(c.bytesReceived).toBe(2 * (N / p) * (p - 1));
      }

      const d3 = data();
      await onAllRanks(p, (c, r) => ALGORITHMS.allReduce.tree.run(c, d3[r], 'sum', scratches[r]));
      // from the deepest leaf (rank P-1) up to the root, every hop carries N bytes up
      let pathBytes = 0;
      for (let r = p - 1; r > 0; r = (r - 1) >> 1) pathBytes += comms[r].sentTo[(r - 1) >> 1];
      expect(pathBytes).toBe(Math.floor(Math.log2(p)) * N);
      expect(comms[0].bytesSent).toBe(treeChildren(0, p).length * N);
      [d1, d2, d3].forEach((d) => d.forEach((t) => checkReduced('float32', 'sum', p, t, 'traffic run')));
    }
  });
});

// ---- hierarchical all-reduce over ranks placed on "hosts" -------------------------------------

describe('allreduce hierarchical across hosts', () => {
  // one letter per rank: its host
  const LAYOUTS = ['AABB', 'ABAB', 'AAABBB', 'AABBCC', 'AAB', 'ABB', 'AABBB', 'AAAABBBB'];
  const hostMeshes = new Map<string, MeshComms>();
  beforeAll(async () => {
    for (const l of LAYOUTS)
      hostMeshes.set(
        l,
        await MeshComms.create(
          l.length,
          'tcp',
          [...l].map((h) => `test-host-${h}`),
        ),
      );
  });
  afterAll(async () => {
    for (const m of hostMeshes.values()) await m.close();
  });

  async function onHosts(layout: string, fn: (comm: CountingComm, rank: number) => Promise<void>): Promise<CountingComm[]> {
    const comms = hostMeshes.get(layout)!.nextOp();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`ranks did not finish within 10 s (${layout})`)), 10_000);
    });
    try {
      await Promise.race([Promise.all(comms.map((c, r) => fn(c, r))), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return comms;
  }

  const algo = ALGORITHMS.allReduce.hierarchical;
  const combos: [DType, ReduceOp][] = [
    ['float32', 'sum'],
    ['int32', 'product'],
    ['int8', 'sum'],
    ['uint8', 'max'],
    ['float64', 'min'],
    ['int64', 'bxor'],
    ['int32', 'band'],
    ['int8', 'bor'],
    ['float16', 'sum'],
    ['bfloat16', 'avg'],
    ['float32', 'avg'],
  ];
  for (const layout of LAYOUTS) {
    const p = layout.length;
    it(`${layout}: the comm sees the hosts; every dtype x op, counts ${countsFor(p).join('/')}, small chunks (many segments) too`, async () => {
      const comms = await onHosts(layout, async () => {});
      const ids = [...layout].map((h) => h.charCodeAt(0) - 65);
      comms.forEach((c) => expect(c.hosts).toEqual(ids));
      for (const [dtype, op] of combos) {
        for (const count of countsFor(p)) {
          for (const chunkBytes of [undefined, 64]) {
            const data = Array.from({ length: p }, (_, r) => input(dtype, r, count));
            await onHosts(layout, (c, r) => algo.run(c, data[r], op, scratches[r], { chunkBytes }));
            data.forEach((t, r) => checkReduced(dtype, op, p, t, `hierarchical ${layout} ${dtype} ${op} n=${count} rank ${r}`));
          }
        }
      }
    });
  }

  it('all-gather: every layout, equal and uneven blocks; each block leaves its host once per other host', async () => {
    const ag = ALGORITHMS.allGather.hierarchical;
    for (const layout of LAYOUTS) {
      const p = layout.length;
      const hostsOf = [...layout];
      const H = new Set(hostsOf).size;
      const uniformHosts = [...new Set(hostsOf)].every((h) => hostsOf.filter((x) => x === h).length === p / H);
      for (const base of [0, 1, 7, 1000]) {
        for (const uneven of [false, true]) {
          const len = (r: number) => (uneven ? blockLen(r, base) : base);
          const inputs = Array.from({ length: p }, (_, r) => Uint8Array.from({ length: len(r) }, (_, i) => fillByte(r, i)));
          const outs = Array.from({ length: p }, () => Array.from({ length: p }, (_, j) => new Uint8Array(len(j))));
          const comms = await onHosts(layout, (c, r) => ag.run(c, inputs[r], outs[r], scratches[r]));
          outs.forEach((o, r) =>
            o.forEach((b, j) => {
              if (!Buffer.from(b).equals(Buffer.from(inputs[j]))) throw new Error(`${layout} base ${base} uneven ${uneven}: rank ${r} block ${j}`);
            }),
          );
          if (!uneven && uniformHosts) {
            for (const h of new Set(hostsOf)) {
              let out = 0;
              comms.forEach((c, r) => {
                if (hostsOf[r] === h) c.sentTo.forEach((b, to) => (out += hostsOf[to] === h ? 0 : b));
              });
              expect({ layout, host: h, out }).toEqual({ layout, host: h, out: (H - 1) * (p / H) * base });
            }
          }
        }
      }
    }
  });

  it('only the combined data crosses between hosts: 2·(H-1)/H·N out of each host (a flat ring: 2·(P-1)/P·N over each cut)', async () => {
    for (const layout of ['AABB', 'AAABBB', 'AABBCC', 'AAAABBBB']) {
      const p = layout.length;
      // six segments (a chunk each), each splitting evenly among the ranks of a host and (three
      // hosts) the hosts
      const count = 10080;
      const chunkBytes = (count * 4) / 6;
      const N = count * 4;
      const hostsOf = [...layout];
      const H = new Set(hostsOf).size;
      const data = Array.from({ length: p }, (_, r) => input('float32', r, count));
      const comms = await onHosts(layout, (c, r) => algo.run(c, data[r], 'sum', scratches[r], { chunkBytes }));
      data.forEach((t, r) => checkReduced('float32', 'sum', p, t, `traffic ${layout} rank ${r}`));
      for (const h of new Set(hostsOf)) {
        let out = 0;
        comms.forEach((c, r) => {
          if (hostsOf[r] === h) c.sentTo.forEach((b, to) => (out += hostsOf[to] === h ? 0 : b));
        });
        expect({ layout, host: h, out }).toEqual({ layout, host: h, out: (2 * (H - 1) * N) / H });
      }
    }
  });
});

// ---- broadcast / reduce ---------------------------------------------------------------------

describe('broadcast', () => {
  for (const name of algorithmNames('broadcast')) {
    for (const p of SIZES) {
      it(`${name} P=${p} from every root`, async () => {
        for (const root of [...new Set([0, p - 1, p >> 1])]) {
          for (const bytes of [0, 1, 7, 4000]) {
            const bufs = Array.from({ length: p }, (_, r) => Uint8Array.from({ length: bytes }, (_, i) => (r === root ? (i * 13 + root) & 255 : 0)));
            await onAllRanks(p, (c, r) => ALGORITHMS.broadcast[name].run(c, bufs[r], root, scratches[r], { chunkBytes: 1000 }));
            bufs.forEach((b, r) => {
              for (let i = 0; i < bytes; i++) if (b[i] !== ((i * 13 + root) & 255)) throw new Error(`rank ${r} byte ${i}`);
            });
            const comms = meshes.get(p)!.comms;
            comms.forEach((c, r) => {
              const want = ALGORITHMS.broadcast[name].traffic!(bytes, 1, p, r, root);
              expect({ r, sent: c.bytesSent, received: c.bytesReceived }).toEqual({ r, ...want });
            });
          }
        }
      });
    }
  }
});

describe('reduce', () => {
  for (const p of SIZES) {
    it(`binomial P=${p} to every root; only the root changes`, async () => {
      for (let root = 0; root < p; root++) {
        for (const [dtype, op] of [
          ['float32', 'sum'],
          ['int32', 'max'],
          ['float16', 'avg'],
        ] as [DType, ReduceOp][]) {
          for (const count of countsFor(p)) {
            const data = Array.from({ length: p }, (_, r) => input(dtype, r, count));
            await onAllRanks(p, (c, r) => ALGORITHMS.reduce.binomial.run(c, data[r], op, root, scratches[r]));
            checkReduced(dtype, op, p, data[root], `reduce root ${root}`);
            data.forEach((t, r) => {
              if (r === root) return;
              const orig = input(dtype, r, count);
              expect(Array.from(bytesOf(t))).toEqual(Array.from(bytesOf(orig)));
            });
          }
        }
      }
    });
  }
});

// ---- gather / scatter / all-gather / all-to-all (per-rank sizes may differ) -----------------

const blockLen = (r: number, base: number) => (base === 0 ? 0 : base + ((r * 3) % 4)); // uneven, some equal
const fillByte = (r: number, i: number) => (r * 31 + i * 7 + 1) & 255;

describe('gather / scatter', () => {
  for (const p of SIZES) {
    it(`linear P=${p}, uneven blocks, every root`, async () => {
      for (let root = 0; root < p; root++) {
        for (const base of [0, 1, 7, 1000]) {
          const inputs = Array.from({ length: p }, (_, r) => Uint8Array.from({ length: blockLen(r, base) }, (_, i) => fillByte(r, i)));
          const outs = Array.from({ length: p }, (_, r) => new Uint8Array(blockLen(r, base)));
          await onAllRanks(p, (c, r) => ALGORITHMS.gather.linear.run(c, inputs[r], r === root ? outs : undefined, root));
          outs.forEach((o, r) => expect(Buffer.from(o).equals(Buffer.from(inputs[r]))).toBe(true));

          const received = Array.from({ length: p }, (_, r) => new Uint8Array(blockLen(r, base)));
          await onAllRanks(p, (c, r) => ALGORITHMS.scatter.linear.run(c, received[r], r === root ? inputs : undefined, root));
          received.forEach((o, r) => expect(Buffer.from(o).equals(Buffer.from(inputs[r]))).toBe(true));
          const comms = meshes.get(p)!.comms;
          const total = inputs.reduce((s, b, r) => s + (r === root ? 0 : b.byteLength), 0);
          expect(comms[root].bytesSent).toBe(total);
        }
      }
    });
  }
});

describe('allgather', () => {
  for (const name of algorithmNames('allGather')) {
    for (const p of SIZES) {
      it(`${name} P=${p}, equal and uneven blocks`, async () => {
        for (const base of [0, 1, 7, 1000]) {
          for (const uneven of [false, true]) {
            const len = (r: number) => (uneven ? blockLen(r, base) : base);
            const inputs = Array.from({ length: p }, (_, r) => Uint8Array.from({ length: len(r) }, (_, i) => fillByte(r, i)));
            const outs = Array.from({ length: p }, () => Array.from({ length: p }, (_, j) => new Uint8Array(len(j))));
            await onAllRanks(p, (c, r) => ALGORITHMS.allGather[name].run(c, inputs[r], outs[r], scratches[r]));
            outs.forEach((o, r) =>
              o.forEach((b, j) => {
                if (!Buffer.from(b).equals(Buffer.from(inputs[j]))) throw new Error(`rank ${r} block ${j}`);
              }),
            );
            if (!uneven) {
              for (const c of meshes.get(p)!.comms) expect(c.bytesSent).toBe((p - 1) * base);
            }
          }
        }
      });
    }
  }
});

describe('alltoall', () => {
  for (const p of SIZES) {
    it(`pairwise P=${p}, variable splits`, async () => {
      for (const base of [0, 1, 7, 100]) {
        const size = (from: number, to: number) => (base === 0 ? 0 : (base + from + 2 * to) % (base + 3));
        const inputs = Array.from({ length: p }, (_, r) =>
          Array.from({ length: p }, (_, j) => Uint8Array.from({ length: size(r, j) }, (_, i) => fillByte(r * 8 + j, i))),
        );
        const outs = Array.from({ length: p }, (_, r) => Array.from({ length: p }, (_, j) => new Uint8Array(size(j, r))));
        await onAllRanks(p, (c, r) => ALGORITHMS.allToAll.pairwise.run(c, inputs[r], outs[r]));
        outs.forEach((o, r) =>
          o.forEach((b, j) => {
            if (!Buffer.from(b).equals(Buffer.from(inputs[j][r]))) throw new Error(`rank ${r} from ${j}`);
          }),
        );
      }
    });
  }
});

// ---- reduce-scatter -------------------------------------------------------------------------

describe('reducescatter', () => {
  for (const name of algorithmNames('reduceScatter')) {
    for (const p of SIZES) {
      it(`${name} P=${p}, equal and uneven counts, input unchanged`, async () => {
        for (const [dtype, op] of [
          ['float32', 'sum'],
          ['int32', 'product'],
          ['bfloat16', 'avg'],
          ['int8', 'bor'],
        ] as [DType, ReduceOp][]) {
          for (const base of countsFor(p)) {
            for (const uneven of [false, true]) {
              const counts = Array.from({ length: p }, (_, r) => (uneven ? blockLen(r, base) : base));
              const total = counts.reduce((a, b) => a + b, 0);
              const ins = Array.from({ length: p }, (_, r) => input(dtype, r, total));
              const outs = counts.map((c) => allocTensor(dtype, c));
              await onAllRanks(p, (c, r) => ALGORITHMS.reduceScatter[name].run(c, ins[r], outs[r], counts, op, scratches[r]));
              let off = 0;
              outs.forEach((o, r) => {
                checkReduced(dtype, op, p, o, `${name} ${dtype} ${op} P=${p} counts=${counts} rank ${r}`, off);
                off += counts[r];
              });
              ins.forEach((t, r) => expect(Buffer.from(bytesOf(t)).equals(Buffer.from(bytesOf(input(dtype, r, total))))).toBe(true));
            }
          }
        }
      });
    }
  }
  it('ring: each rank sends (N/P)·(P-1)', async () => {
    const p = 4;
    const counts = [10, 10, 10, 10];
    const ins = Array.from({ length: p }, (_, r) => input('float32', r, 40));
    const outs = counts.map((c) => allocTensor('float32', c));
    await onAllRanks(p, (c, r) => ALGORITHMS.reduceScatter.ring.run(c, ins[r], outs[r], counts, 'sum', scratches[r]));
    for (const c of meshes.get(p)!.comms) expect(c.bytesSent).toBe(3 * 10 * elementSize('float32'));
  });
});

// ---- barrier --------------------------------------------------------------------------------

describe('barrier', () => {
  for (const p of SIZES) {
    it(`dissemination P=${p}: nobody leaves before everybody arrived`, async () => {
      const arrived: number[] = [];
      const left: number[] = [];
      await onAllRanks(p, async (c, r) => {
        await new Promise((res) => setTimeout(res, (p - 1 - r) * 15)); // rank 0 arrives last
        arrived[r] = performance.now();
        await ALGORITHMS.barrier.dissemination.run(c);
        left[r] = performance.now();
      });
      const lastArrival = Math.max(...arrived);
      for (const t of left) expect(t).toBeGreaterThanOrEqual(lastArrival);
    });
  }
});
