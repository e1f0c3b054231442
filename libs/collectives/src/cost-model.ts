// Alpha-beta(-gamma) cost model for choosing an algorithm per collective, message size and world
// size: alpha = seconds per message, beta = seconds per byte on the wire, gamma = seconds per byte
// reduced. An explicit `algorithm` option or CMESH_ALGO overrides the model.
import { ALGORITHMS, CollectiveKind, DEFAULT_CHUNK_BYTES, algorithmNames } from './algorithms';
import { ceilLog2, floorPow2 } from './algorithms/common';
import { InvalidArgumentError } from './errors';
import { debug, debugOn } from './debug';
import { isOversubscribed } from './oversubscription';

export interface CostParams {
  /** seconds per message (latency) */
  alpha: number;
  /** seconds per byte moved between two ranks */
  beta: number;
  /** seconds per byte reduced (one elementwise kernel pass) */
  gamma: number;
  /** pipelining chunk the chunked algorithms use */
  chunkBytes: number;
}

// Measured on the build machine (2 cores, loopback, Node 20): two-process ping-pong of 8 B gave
// 74 us one way; 16 MiB round trips gave 0.92 ns/B (1.09 GB/s); float32 SUM over 64 MiB ran at
// about 0.55 ns per buffer byte. Recalibrate with calibrate() on other machines.
export const MEASURED_DEFAULTS: Readonly<CostParams> = Object.freeze({
  alpha: 74e-6,
  beta: 0.92e-9,
  gamma: 0.55e-9,
  chunkBytes: DEFAULT_CHUNK_BYTES,
});

let current: CostParams = { ...MEASURED_DEFAULTS };

/** Replaces the model's parameters (e.g. with figures measured by a benchmark). */
export function calibrate(alpha: number, beta: number, gamma: number): void {
  for (const [name, v] of [['alpha', alpha], ['beta', beta], ['gamma', gamma]] as const) {
    if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0)) {
      throw new InvalidArgumentError(`calibrate: ${name} must be a finite number >= 0, got ${v}`);
    }
  }
  current = { ...current, alpha, beta, gamma };
  memo.clear();
}

export function getCostParams(): CostParams {
  return { ...current };
}

type CostFormula = (bytes: number, P: number, c: CostParams) => number;

const chunks = (bytes: number, chunk: number) => Math.max(1, Math.ceil(bytes / chunk));

/** Seconds for each algorithm; `bytes` is the tensor size (the whole gathered/scattered tensor for those ops). */
export const COST_FORMULAS: Record<CollectiveKind, Record<string, CostFormula>> = {
  allreduce: {
    // the root receives and reduces P-1 buffers one after another, then sends P-1 copies
    direct: (N, P, { alpha, beta, gamma }) => 2 * (P - 1) * (alpha + N * beta) + (P - 1) * N * gamma,
    // pipelined per chunk: latencies add up along the ring, the reductions hide behind the transfers
    // except for one chunk per step
    ring: (N, P, { alpha, beta, gamma, chunkBytes }) => {
      const k = chunks(N / P, chunkBytes);
      return (2 * (P - 1) + k - 1) * alpha + 2 * ((P - 1) / P) * N * beta + (P - 1) * Math.min(N / P, chunkBytes) * gamma;
    },
    tree: (N, P, { alpha, beta, gamma, chunkBytes }) => {
      if (P === 1) return 0;
      const depth = Math.floor(Math.log2(P));
      const k = chunks(N, chunkBytes);
      const m = N / k;
      const kids = Math.min(2, P - 1);
      return (depth + k - 1) * (kids * (alpha + m * beta) + kids * m * gamma) + (depth + k - 1) * kids * (alpha + m * beta);
    },
    'halving-doubling': (N, P, { alpha, beta, gamma }) => {
      const p2 = floorPow2(P);
      const frac = (p2 - 1) / p2;
      const extra = P > p2 ? 2 * (alpha + N * beta) + N * gamma : 0;
      return 2 * Math.log2(p2) * alpha + 2 * frac * N * beta + frac * N * gamma + extra;
    },
    'recursive-doubling': (N, P, { alpha, beta, gamma }) => {
      const p2 = floorPow2(P);
      const extra = P > p2 ? 2 * (alpha + N * beta) + N * gamma : 0;
      return Math.log2(p2) * (alpha + N * beta + N * gamma) + extra;
    },
  },
  broadcast: {
    binomial: (N, P, { alpha, beta }) => ceilLog2(P) * (alpha + N * beta),
    chain: (N, P, { alpha, beta, chunkBytes }) => {
      const k = chunks(N, chunkBytes);
      return P === 1 ? 0 : (P - 2 + k) * (alpha + (N / k) * beta);
    },
  },
  reduce: {
    binomial: (N, P, { alpha, beta, gamma }) => ceilLog2(P) * (alpha + N * beta + N * gamma),
  },
  gather: {
    linear: (N, P, { alpha, beta }) => (P - 1) * alpha + ((P - 1) / P) * N * beta,
  },
  scatter: {
    linear: (N, P, { alpha, beta }) => (P - 1) * alpha + ((P - 1) / P) * N * beta,
  },
  allgather: {
    ring: (N, P, { alpha, beta }) => (P - 1) * (alpha + (N / P) * beta),
    // one extra pass through scratch to un-rotate the blocks (costed like a kernel pass)
    bruck: (N, P, { alpha, beta, gamma }) => ceilLog2(P) * alpha + ((P - 1) / P) * N * beta + N * gamma,
  },
  reducescatter: {
    ring: (N, P, { alpha, beta, gamma }) => (P - 1) * (alpha + (N / P) * (beta + gamma)),
    halving: (N, P, { alpha, beta, gamma }) => {
      const p2 = floorPow2(P);
      const extra = P > p2 ? 2 * alpha + N * (beta + gamma) + (N / P) * beta : 0;
      return Math.log2(p2) * alpha + ((p2 - 1) / p2) * N * (beta + gamma) + N * gamma + extra; // + copy to scratch
    },
  },
  barrier: {
    dissemination: (_N, P, { alpha }) => ceilLog2(P) * alpha,
  },
  alltoall: {
    pairwise: (N, P, { alpha, beta }) => (P - 1) * (alpha + (N / P) * beta),
  },
};

const KINDS = Object.keys(ALGORITHMS) as CollectiveKind[];

function checkKind(kind: string): asserts kind is CollectiveKind {
  if (!(KINDS as string[]).includes(kind)) {
    throw new InvalidArgumentError(`unknown collective ${JSON.stringify(kind)}; expected one of ${KINDS.join(', ')}`);
  }
}

function checkName(kind: CollectiveKind, name: string, source: string): string {
  const valid = algorithmNames(kind);
  if (!valid.includes(name)) {
    throw new InvalidArgumentError(`unknown ${kind} algorithm ${JSON.stringify(name)} (${source}); valid: ${valid.join(', ')}`);
  }
  return name;
}

/**
 * The algorithm CMESH_ALGO forces for `kind`, if any. Syntax: a name ("ring": used by every
 * collective that has an algorithm of that name) or "op:name" pairs separated by commas
 * ("allreduce:tree,broadcast:chain"). Names no collective has are errors.
 */
export function algorithmFromEnv(kind: CollectiveKind, value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let chosen: string | undefined;
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (!item) continue;
    const colon = item.indexOf(':');
    if (colon >= 0) {
      const k = item.slice(0, colon).trim().toLowerCase().replace(/[_-]/g, '');
      const name = item.slice(colon + 1).trim();
      checkKind(k);
      checkName(k, name, 'CMESH_ALGO');
      if (k === kind) chosen = name;
    } else {
      const owners = KINDS.filter((k) => algorithmNames(k).includes(item));
      if (owners.length === 0) {
        const all = KINDS.map((k) => `${k}: ${algorithmNames(k).join('|')}`).join('; ');
        throw new InvalidArgumentError(`CMESH_ALGO names unknown algorithm ${JSON.stringify(item)}; valid: ${all}`);
      }
      if (owners.includes(kind)) chosen = item;
    }
  }
  return chosen;
}

export interface ChooseOptions extends Partial<CostParams> {
  /** explicit choice (the collective's `algorithm` option); wins over CMESH_ALGO and the model */
  algorithm?: string;
  /** environment to read CMESH_ALGO from (default process.env) */
  env?: Record<string, string | undefined>;
  /** more local ranks than cores (default: from LOCAL_WORLD_SIZE in env) */
  oversubscribed?: boolean;
}

/**
 * Algorithms the model leaves out when ranks take turns on the cores: a pipelined chain only
 * pays off while every forwarding rank runs at once (broadcast at world 4 on 2 cores: chain
 * 1.2-1.6x slower than the binomial tree, bench/peers).
 */
const NEEDS_A_CORE_PER_RANK: Partial<Record<CollectiveKind, readonly string[]>> = { broadcast: ['chain'] };

/** Estimated seconds for one algorithm. */
export function estimateCost(kind: CollectiveKind, name: string, bytes: number, worldSize: number, params: Partial<CostParams> = {}): number {
  checkKind(kind);
  checkName(kind, name, 'estimateCost');
  return COST_FORMULAS[kind][name](bytes, worldSize, { ...current, ...params });
}

/** Picks the algorithm for a collective: explicit option, else CMESH_ALGO, else the cheapest by the model. */
export function chooseAlgorithm(kind: CollectiveKind, bytes: number, worldSize: number, opts: ChooseOptions = {}): string {
  if (opts.algorithm !== undefined) {
    checkKind(kind);
    return checkName(kind, opts.algorithm, 'algorithm option');
  }
  // the common call (current parameters) is remembered: it runs before every collective
  const plain = opts.oversubscribed === undefined && opts.alpha === undefined && opts.beta === undefined && opts.gamma === undefined && opts.chunkBytes === undefined;
  if (!plain) return choose(kind, bytes, worldSize, opts);
  const env = opts.env ?? process.env;
  const envKey = `${env.CMESH_ALGO}|${env.LOCAL_WORLD_SIZE}`;
  if (envKey !== memoEnv) {
    memo.clear();
    memoEnv = envKey;
  }
  const key = `${kind}/${bytes}/${worldSize}`;
  let name = memo.get(key);
  if (name === undefined) {
    name = choose(kind, bytes, worldSize, opts);
    if (memo.size > 4096) memo.clear();
    memo.set(key, name);
    if (debugOn) debug('algorithm', `${kind} of ${bytes} B at world ${worldSize}: ${name}${env.CMESH_ALGO ? ` (CMESH_ALGO=${env.CMESH_ALGO})` : ' (cost model)'}`);
  }
  return name;
}

const memo = new Map<string, string>();
let memoEnv = '';

function choose(kind: CollectiveKind, bytes: number, worldSize: number, opts: ChooseOptions): string {
  checkKind(kind);
  const forced = algorithmFromEnv(kind, (opts.env ?? process.env).CMESH_ALGO);
  if (forced !== undefined) return forced;
  const params: CostParams = { ...current };
  for (const key of ['alpha', 'beta', 'gamma', 'chunkBytes'] as const) if (opts[key] !== undefined) params[key] = opts[key]!;
  const skip = (opts.oversubscribed ?? isOversubscribed(opts.env ?? process.env)) ? (NEEDS_A_CORE_PER_RANK[kind] ?? []) : [];
  let best = '';
  let bestCost = Infinity;
  for (const [name, f] of Object.entries(COST_FORMULAS[kind])) {
    if (skip.includes(name)) continue;
    const cost = f(bytes, worldSize, params);
    if (cost < bestCost) {
      best = name;
      bestCost = cost;
    }
  }
  return best;
}
