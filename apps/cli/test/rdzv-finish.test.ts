// The end of a multi-node job on the dynamic rendezvous. Nodes whose workers finish together can
// all see every node done; the one that is a moment behind still has store operations to make.
// Every node must finish promptly and without error, and the state must be gone once the last one
// has left (nats: the bucket deleted; c10d: the host's server closed). The lagging node here is
// the real store behind a wrapper that delays each operation after the node's own `done`.
import { setTimeout as sleep } from 'timers/promises';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { NatsKvStore, PrefixStore, Store, TcpStore } from '@cmesh/collectives';
import { freePort, NatsServer, startNatsServer } from '@cmesh/testing';
import { RunOptions } from '../src/run/rdzv';
import { StoreRendezvous } from '../src/run/rdzv-round';

let nats: NatsServer;

beforeAll(async () => {
  nats = await startNatsServer();
});

afterAll(async () => {
  await nats?.stop();
});

const options = (rdzvId: string): RunOptions => ({
  nprocPerNode: 1,
  nnodes: { min: 2, max: 2 },
  masterAddr: '127.0.0.1',
  masterPort: 0,
  rdzvBackend: 'test',
  rdzvId,
  lastCallMs: 0,
  timeoutMs: 20_000,
  keepAliveIntervalMs: 1000,
  keepAliveMaxAttempt: 5,
  closeTimeoutMs: 5000,
});

/** `store`, each operation made `lagMs` late once this node has written its `done` key. */
function lagging(store: Store, lagMs: number): Store {
  let late = false;
  return new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop) as unknown;
      if (typeof v !== 'function' || prop === 'close') return v;
      return async (...args: unknown[]) => {
        if (late) await sleep(lagMs);
        const r = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (prop === 'set' && typeof args[0] === 'string' && args[0].includes('/done/')) late = true;
        return r;
      };
    },
  });
}

/** `p`, or an error once `ms` passed: a node waiting on a store that is gone fails here. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Two nodes of one job, the second lagging; `gone()`: the job's store state no longer exists. */
type Pair = { nodes: StoreRendezvous[]; gone(): Promise<boolean> };

const backends: Record<string, (id: string) => Promise<Pair>> = {
  nats: async (id) => {
    const bucket = `cmesh_test_rdzv_${id.replace(/[^A-Za-z0-9]/g, '_')}`;
    const nodes: StoreRendezvous[] = [];
    for (const lag of [0, 300]) {
      const store = await NatsKvStore.open({ servers: nats.url, bucket, timeoutMs: 30_000 });
      const scoped = new PrefixStore(`rdzv/${id}`, lag ? lagging(store, lag) : store);
      nodes.push(
        new StoreRendezvous(scoped, options(id), '127.0.0.1', false, async (jobOver) => {
          if (jobOver) await store.destroy().catch(() => undefined);
          await store.close();
        }),
      );
    }
    return {
      nodes,
      gone: async () => {
        const nc = await connect({ servers: nats.url });
        try {
          for await (const s of (await jetstreamManager(nc)).streams.names()) if (s === `KV_${bucket}`) return false;
          return true;
        } finally {
          await nc.close();
        }
      },
    };
  },
  c10d: async (id) => {
    const port = await freePort();
    const host = await TcpStore.create({ host: '127.0.0.1', port, isMaster: true, timeoutMs: 30_000 });
    const client = await TcpStore.create({ host: '127.0.0.1', port, isMaster: false, timeoutMs: 30_000 });
    const node = (store: TcpStore, isHost: boolean, lag: number) =>
      new StoreRendezvous(new PrefixStore(`rdzv/${id}`, lag ? lagging(store, lag) : store), options(id), '127.0.0.1', isHost, () => store.close());
    return {
      nodes: [node(host, true, 0), node(client, false, 300)],
      gone: async () => {
        try {
          await (await TcpStore.create({ host: '127.0.0.1', port, isMaster: false, timeoutMs: 1000 })).close();
          return false;
        } catch {
          return true;
        }
      },
    };
  },
};

describe.each(Object.keys(backends))('rendezvous %s: nodes that finish together', (backend) => {
  it('every node leaves promptly, and the last one out removes the job state', async () => {
    const { nodes, gone } = await backends[backend](`fin-${backend}-${Date.now()}`);
    const rounds = await Promise.all(nodes.map((r) => r.next('start')));
    expect(rounds.map((r) => r.nodeRank).sort()).toEqual([0, 1]);
    await within(10_000, 'both nodes finishing', Promise.all(nodes.map((r) => r.finish('succeeded'))));
    expect(await gone()).toBe(true);
  }, 60_000);
});
