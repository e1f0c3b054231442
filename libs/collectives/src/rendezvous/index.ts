// Init methods (torch's init_method): turn a URL or the environment into a store + rank + world
// size. env:// is the default; tcp://, file:// are built in; nats:// (the coordinator's JetStream
// KV) registers itself through registerInitMethod so the core needs no NATS client.
import { InvalidArgumentError } from '../errors';
import { FileStore, Store, TcpStore } from '../store';
import { debug, debugOn, setDebugRank } from '../debug';

export interface RendezvousOptions {
  initMethod?: string;
  rank?: number;
  worldSize?: number;
  store?: Store;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** The run's shared secret for a TcpStore (env://, tcp://); default CMESH_SECRET. */
  secret?: string;
}

export interface RendezvousResult {
  store: Store;
  rank: number;
  worldSize: number;
}

export type InitMethodHandler = (url: URL, opts: RendezvousOptions & { rank: number; worldSize: number }) => Promise<Store>;

const handlers = new Map<string, InitMethodHandler>();

export function registerInitMethod(scheme: string, handler: InitMethodHandler): void {
  handlers.set(scheme.replace(/:$/, ''), handler);
}

function requireEnv(env: NodeJS.ProcessEnv, name: string): string {
  const v = env[name];
  if (v === undefined || v === '') {
    throw new InvalidArgumentError(`environment variable ${name} expected, but not set (needed by the env:// init method)`);
  }
  return v;
}

function toInt(value: string | number | undefined | null, what: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`${what} must be an integer, got ${JSON.stringify(value)}`);
  return n;
}

function validateRankAndSize(rank: number | undefined, worldSize: number | undefined): { rank: number; worldSize: number } {
  if (worldSize === undefined) throw new InvalidArgumentError('world size is required: pass worldSize, ?world_size= in the init method URL, or set WORLD_SIZE');
  if (worldSize < 1) throw new InvalidArgumentError(`world size must be an integer >= 1, got ${worldSize}`);
  if (rank === undefined) throw new InvalidArgumentError('rank is required: pass rank, ?rank= in the init method URL, or set RANK');
  if (rank < 0 || rank >= worldSize) {
    throw new InvalidArgumentError(`rank must be in [0, ${worldSize}), got ${rank}`);
  }
  return { rank, worldSize };
}

/** The store's secret: the option, else a given environment's CMESH_SECRET (without one, TcpStore reads process.env's). */
function storeSecret(opts: RendezvousOptions): string | undefined {
  return opts.secret ?? (opts.env?.CMESH_SECRET || undefined);
}

registerInitMethod('env', async (_url, opts) => {
  const env = opts.env ?? process.env;
  const host = requireEnv(env, 'MASTER_ADDR');
  const port = toInt(requireEnv(env, 'MASTER_PORT'), 'MASTER_PORT')!;
  return TcpStore.create({ host, port, isMaster: opts.rank === 0, timeoutMs: opts.timeoutMs, secret: storeSecret(opts) });
});

registerInitMethod('tcp', async (url, opts) => {
  if (!url.hostname || !url.port) throw new InvalidArgumentError(`tcp:// init method needs host:port, got ${url.href}`);
  return TcpStore.create({ host: url.hostname, port: Number(url.port), isMaster: opts.rank === 0, timeoutMs: opts.timeoutMs, secret: storeSecret(opts) });
});

registerInitMethod('file', async (url, opts) => {
  if (!url.pathname || url.pathname === '/') throw new InvalidArgumentError(`file:// init method needs a path, got ${url.href}`);
  // like torch, the last rank to close the store removes the file, so a rerun starts clean
  return new FileStore(decodeURIComponent(url.pathname), { worldSize: opts.worldSize, timeoutMs: opts.timeoutMs });
});

/** Resolves rank and world size (explicit > URL query > environment) and connects the store. */
export async function rendezvous(opts: RendezvousOptions = {}): Promise<RendezvousResult> {
  const env = opts.env ?? process.env;
  const initMethod = opts.initMethod ?? (opts.store ? undefined : 'env://');
  let url: URL | undefined;
  if (initMethod !== undefined) {
    try {
      url = new URL(initMethod);
    } catch {
      throw new InvalidArgumentError(`invalid init method URL ${JSON.stringify(initMethod)}`);
    }
  }
  const q = url?.searchParams;
  const rank = toInt(opts.rank, 'rank') ?? toInt(q?.get('rank'), 'rank') ?? toInt(env.RANK, 'RANK');
  const worldSize = toInt(opts.worldSize, 'world size') ?? toInt(q?.get('world_size'), 'world_size') ?? toInt(env.WORLD_SIZE, 'WORLD_SIZE');
  if (url?.protocol === 'env:') {
    if (rank === undefined) requireEnv(env, 'RANK');
    if (worldSize === undefined) requireEnv(env, 'WORLD_SIZE');
  }
  const checked = validateRankAndSize(rank, worldSize);
  if (debugOn) setDebugRank(checked.rank);
  if (debugOn)
    debug(
      'rendezvous',
      `${opts.store ? 'given store' : `init method ${url!.protocol}//${url!.host}${url!.pathname}`}: rank ${checked.rank} of world ${checked.worldSize}`,
    );
  if (opts.store) return { store: opts.store, ...checked };
  const handler = handlers.get(url!.protocol.replace(/:$/, ''));
  if (!handler) {
    throw new InvalidArgumentError(`unsupported init method ${url!.protocol}// (known: ${[...handlers.keys()].map((s) => `${s}://`).join(', ')})`);
  }
  const store = await handler(url!, { ...opts, ...checked }).catch((e: Error) => {
    if (debugOn) debug('rendezvous', `error: store not connected: ${e.message}`);
    throw e;
  });
  if (debugOn) debug('rendezvous', `store connected (${store.constructor.name})`);
  return { store, ...checked };
}
