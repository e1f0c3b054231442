// Alpha-beta(-gamma) cost model for choosing an algorithm per collective, message size and world
// size: alpha = seconds per message, beta = seconds per byte on the wire, gamma = seconds per byte
// reduced. An explicit `algorithm` option or CMESH_ALGO overrides the model.
import { ALGORITHMS, AlgorithmName, CostParams, HostTopology, algorithmNames, algorithmOf } from './algorithms';
import { CostTransport, getCostParams, setCostParams } from './cost-params';
import { InvalidArgumentError } from './errors';
import { debug, debugOn } from './debug';
import { COLLECTIVES, Collective } from './ops/names';
import { isOversubscribed } from './oversubscription';

export type { CostParams } from './algorithms';

export { MEASURED_DEFAULTS, SHM_MEASURED_DEFAULTS, getCostParams } from './cost-params';
export type { CostTransport } from './cost-params';

/** Replaces the model's parameters for a transport (e.g. with figures measured by a benchmark). */
export function calibrate(alpha: number, beta: number, gamma: number, transport: CostTransport = 'tcp'): void {
  for (const [name, v] of [
    ['alpha', alpha],
    ['beta', beta],
    ['gamma', gamma],
  ] as const) {
    if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0)) {
      throw new InvalidArgumentError(`calibrate: ${name} must be a finite number >= 0, got ${v}`);
    }
  }
  setCostParams(transport, alpha, beta, gamma);
  memo.clear();
}

const KINDS = COLLECTIVES.filter((c) => c in ALGORITHMS);

function checkKind(kind: string): asserts kind is Collective {
  if (!(KINDS as string[]).includes(kind)) {
    throw new InvalidArgumentError(`unknown collective ${JSON.stringify(kind)}; expected one of ${KINDS.join(', ')}`);
  }
}

function checkName<C extends Collective>(kind: C, name: string, source: string): AlgorithmName<C> {
  const valid: string[] = algorithmNames(kind);
  if (!valid.includes(name)) {
    throw new InvalidArgumentError(`unknown ${kind} algorithm ${JSON.stringify(name)} (${source}); valid: ${valid.join(', ')}`);
  }
  return name as AlgorithmName<C>;
}

/** CMESH_ALGO's collective names: any case, with or without _ and - ("allreduce", "all_reduce", "allReduce"). */
function kindFromEnv(text: string): Collective {
  const key = text.toLowerCase().replace(/[_-]/g, '');
  const kind = KINDS.find((k) => k.toLowerCase() === key);
  if (!kind) throw new InvalidArgumentError(`unknown collective ${JSON.stringify(text)} in CMESH_ALGO; expected one of ${KINDS.join(', ')}`);
  return kind;
}

/**
 * The algorithm CMESH_ALGO forces for `kind`, if any. Syntax: a name ("ring": used by every
 * collective that has an algorithm of that name) or "op:name" pairs separated by commas
 * ("allreduce:tree,broadcast:chain"). Names no collective has are errors.
 */
export function algorithmFromEnv<C extends Collective>(kind: C, value: string | undefined): AlgorithmName<C> | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let chosen: AlgorithmName<C> | undefined;
  for (const raw of value.split(',')) {
    const item = raw.trim();
    if (!item) continue;
    const colon = item.indexOf(':');
    if (colon >= 0) {
      const k = kindFromEnv(item.slice(0, colon).trim());
      const name = item.slice(colon + 1).trim();
      checkName(k, name, 'CMESH_ALGO');
      if (k === kind) chosen = name as AlgorithmName<C>;
    } else {
      const owners = KINDS.filter((k) => (algorithmNames(k) as string[]).includes(item));
      if (owners.length === 0) {
        const all = KINDS.map((k) => `${k}: ${algorithmNames(k).join('|')}`).join('; ');
        throw new InvalidArgumentError(`CMESH_ALGO names unknown algorithm ${JSON.stringify(item)}; valid: ${all}`);
      }
      if (owners.includes(kind)) chosen = item as AlgorithmName<C>;
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
  /** whose parameters: `shm` when every pair of the group talks over shared memory (default tcp) */
  transport?: CostTransport;
  /** how the group's ranks sit on hosts (default: unknown, flat algorithms only) */
  hosts?: HostLayoutSummary;
}

/** The group's host layout as the model sees it; `intra` is the transport between ranks of one host. */
export interface HostLayoutSummary {
  hosts: number;
  perHost: number;
  uniform: boolean;
  intra: CostTransport;
}

function topologyOf(h: HostLayoutSummary | undefined): HostTopology | undefined {
  return h && { hosts: h.hosts, perHost: h.perHost, uniform: h.uniform, intra: getCostParams(h.intra) };
}

/** Estimated seconds for one algorithm. */
export function estimateCost(
  kind: Collective,
  name: string,
  bytes: number,
  worldSize: number,
  params: Partial<CostParams> = {},
  hosts?: HostLayoutSummary,
): number {
  checkKind(kind);
  checkName(kind, name, 'estimateCost');
  return algorithmOf(kind, name).cost(bytes, worldSize, { ...getCostParams(), ...params }, topologyOf(hosts));
}

/** Picks the algorithm for a collective: explicit option, else CMESH_ALGO, else the cheapest by the model. */
export function chooseAlgorithm<C extends Collective>(kind: C, bytes: number, worldSize: number, opts: ChooseOptions = {}): AlgorithmName<C> {
  if (opts.algorithm !== undefined) {
    checkKind(kind);
    return checkName(kind, opts.algorithm, 'algorithm option');
  }
  // the common call (current parameters) is remembered: it runs before every collective
  const plain =
    opts.oversubscribed === undefined && opts.alpha === undefined && opts.beta === undefined && opts.gamma === undefined && opts.chunkBytes === undefined;
  if (!plain) return choose(kind, bytes, worldSize, opts);
  const env = opts.env ?? process.env;
  const envKey = `${env.CMESH_ALGO}|${env.LOCAL_WORLD_SIZE}`;
  if (envKey !== memoEnv) {
    memo.clear();
    memoEnv = envKey;
  }
  const h = opts.hosts;
  const key = `${kind}/${bytes}/${worldSize}/${opts.transport ?? 'tcp'}${h ? `/${h.hosts}x${h.perHost}${h.uniform ? '' : '~'}/${h.intra}` : ''}`;
  let name = memo.get(key) as AlgorithmName<C> | undefined;
  if (name === undefined) {
    name = choose(kind, bytes, worldSize, opts);
    if (memo.size > 4096) memo.clear();
    memo.set(key, name);
    if (debugOn)
      debug(
        'algorithm',
        `${kind} of ${bytes} B at world ${worldSize}: ${name}${env.CMESH_ALGO ? ` (CMESH_ALGO=${env.CMESH_ALGO})` : ` (cost model${opts.transport === 'shm' ? ', shm' : ''}${h ? `, ${h.hosts} hosts x ${h.perHost}${h.uniform ? '' : ' at most'} (${h.intra} within)` : ''})`}`,
      );
  }
  return name;
}

const memo = new Map<string, string>();
let memoEnv = '';

function choose<C extends Collective>(kind: C, bytes: number, worldSize: number, opts: ChooseOptions): AlgorithmName<C> {
  checkKind(kind);
  const forced = algorithmFromEnv(kind, (opts.env ?? process.env).CMESH_ALGO);
  if (forced !== undefined) return forced;
  const params: CostParams = getCostParams(opts.transport);
  for (const key of ['alpha', 'beta', 'gamma', 'chunkBytes'] as const) if (opts[key] !== undefined) params[key] = opts[key]!;
  // ranks taking turns on the cores: leave out what needs every rank running at once
  const oversubscribed = opts.oversubscribed ?? isOversubscribed(opts.env ?? process.env);
  const topology = topologyOf(opts.hosts);
  let best: AlgorithmName<C> | undefined;
  let bestCost = Infinity;
  for (const name of algorithmNames(kind)) {
    const algo = algorithmOf(kind, name);
    if (oversubscribed && algo.needsACorePerRank) continue;
    const cost = algo.cost(bytes, worldSize, params, topology);
    if (cost < bestCost) {
      best = name;
      bestCost = cost;
    }
  }
  return best!;
}
