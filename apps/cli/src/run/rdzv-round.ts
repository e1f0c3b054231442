// torchrun's c10d rendezvous round on any Store (our TcpStore for c10d, JetStream KV for nats):
// nodes join in order, the round closes at MAX nodes or after a last-call window once MIN have
// joined, node ranks are assigned (--node-rank first, then join order), and node 0 publishes the
// workers' MASTER_ADDR/MASTER_PORT. While workers run, every node keeps itself alive on the store
// and watches for a failure reported by another node or a node that stopped responding.
import { InvalidArgumentError, Store, StoreError } from '@cmesh/collectives';
import * as net from 'net';
import { assignNodeRanks } from './node-ranks';
import { NodeAssignment, RunOptions } from './rdzv';

const POLL_MS = 200;
/** How long the host keeps serving after a failure so that every node can learn of it. */
const FAILURE_DRAIN_MS = 15_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface NodeInfo {
  nproc: number;
  addr: string;
  want: number | null;
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => srv.listen(0, host, resolve).once('error', reject));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

async function closeRound(store: Store, o: RunOptions): Promise<number> {
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    if (await store.check(['final'])) return Number((await store.get('final')).toString());
    const count = await store.add('joined', 0);
    if (count >= o.nnodes.max) return Number((await store.compareSet('final', '', String(o.nnodes.max))).toString());
    if (count >= o.nnodes.min) {
      // last call: late joiners still get in (the round closes early once MAX have joined);
      // whoever closes first decides for everyone
      const lastCallEnd = Date.now() + o.lastCallMs;
      let n = count;
      while (Date.now() < lastCallEnd && n < o.nnodes.max && !(await store.check(['final']))) {
        await sleep(Math.min(POLL_MS, Math.max(0, lastCallEnd - Date.now())));
        n = await store.add('joined', 0);
      }
      return Number((await store.compareSet('final', '', String(Math.min(o.nnodes.max, n)))).toString());
    }
    if (Date.now() > deadline) {
      throw new StoreError(`rendezvous ${o.rdzvId}: only ${count} of at least ${o.nnodes.min} nodes joined within ${o.timeoutMs} ms`);
    }
    await sleep(POLL_MS);
  }
}

/**
 * Joins the round on `store` (already scoped to this run id). `ownAddr` is how other nodes reach
 * this one; `isHost` marks the launcher that hosts the store (it leaves last); `close` releases it.
 */
export async function joinRound(store: Store, o: RunOptions, ownAddr: string, isHost: boolean, close: () => Promise<void>): Promise<NodeAssignment> {
  const me = (await store.add('joined', 1)) - 1; // join order
  if (me >= o.nnodes.max) throw new InvalidArgumentError(`rendezvous ${o.rdzvId} is full (${o.nnodes.max} nodes)`);
  const info: NodeInfo = { nproc: o.nprocPerNode, addr: ownAddr, want: o.nodeRank ?? null };
  await store.set(`node/${me}`, JSON.stringify(info));
  const final = await closeRound(store, o);
  if (me >= final) throw new InvalidArgumentError(`rendezvous ${o.rdzvId} closed with ${final} nodes before this node joined`);

  const infos: NodeInfo[] = [];
  for (let i = 0; i < final; i++) infos.push(JSON.parse((await store.get(`node/${i}`, o.timeoutMs)).toString()) as NodeInfo);
  const nodeRanks = assignNodeRanks(infos.map((x) => x.want));
  const nodeRank = nodeRanks[me];
  let rankOffset = 0;
  let worldSize = 0;
  infos.forEach((x, i) => {
    worldSize += x.nproc;
    if (nodeRanks[i] < nodeRank) rankOffset += x.nproc;
  });
  // node 0 picks a free port for the workers' store; its local rank 0 (global rank 0) hosts it
  if (nodeRank === 0) await store.set('master', `${ownAddr}:${await freePort(ownAddr)}`);
  const master = (await store.get('master', o.timeoutMs)).toString();
  const cut = master.lastIndexOf(':');

  const staleAfterMs = o.keepAliveIntervalMs * o.keepAliveMaxAttempt;
  const seen = new Map<number, { beats: number; at: number }>();
  /** A node (join index) that is neither done nor beating any more. */
  async function staleNode(): Promise<number | undefined> {
    for (let i = 0; i < final; i++) {
      if (i === me) continue;
      const beats = await store.add(`alive/${i}`, 0);
      const s = seen.get(i);
      if (!s || s.beats !== beats) seen.set(i, { beats, at: Date.now() });
      else if (Date.now() - s.at > staleAfterMs && !(await store.check([`done/${i}`]))) return i;
    }
    return undefined;
  }
  const staleMessage = (i: number) => `cmesh run: node ${nodeRanks[i]} stopped responding (no keep-alive for ${staleAfterMs} ms)`;
  const reportFailure = async (message: string) => {
    await store.compareSet('failed', '', message).catch(() => undefined);
  };

  return {
    nodeRank,
    nnodes: final,
    worldSize,
    rankOffset,
    masterAddr: master.slice(0, cut),
    masterPort: Number(master.slice(cut + 1)),
    reportFailure,
    watchFailures: (onFailure) => {
      let stopped = false;
      void (async () => {
        let errors = 0;
        let lastStaleCheck = 0;
        while (!stopped) {
          try {
            await store.add(`alive/${me}`, 1);
            if (await store.check(['failed'])) {
              if (!stopped) onFailure((await store.get('failed')).toString());
              return;
            }
            if (Date.now() - lastStaleCheck >= o.keepAliveIntervalMs) {
              lastStaleCheck = Date.now();
              const dead = await staleNode();
              if (dead !== undefined && !stopped) {
                await reportFailure(staleMessage(dead));
                onFailure(staleMessage(dead));
                return;
              }
            }
            errors = 0;
          } catch (err) {
            // the store went away (its host died): nobody can coordinate this run any more
            if (++errors >= o.keepAliveMaxAttempt && !stopped) {
              onFailure(`cmesh run: lost the rendezvous store: ${(err as Error).message}`);
              return;
            }
          }
          await sleep(POLL_MS);
        }
      })();
      return () => {
        stopped = true;
      };
    },
    finish: async () => {
      try {
        await store.set(`done/${me}`, '1');
        if (isHost) {
          // keep serving until every node is done, or a failure had time to reach them all
          const until = Date.now() + o.timeoutMs;
          let failedAt: number | undefined;
          while (Date.now() < until) {
            const done = await store.check([...Array(final).keys()].map((i) => `done/${i}`));
            if (done) break;
            if (failedAt === undefined && (await store.check(['failed']))) failedAt = Date.now();
            if (failedAt !== undefined && Date.now() - failedAt > FAILURE_DRAIN_MS) break;
            if ((await staleNode()) !== undefined) break;
            await store.add(`alive/${me}`, 1);
            await sleep(POLL_MS);
          }
        }
      } catch {
        /* the store is gone: nothing left to coordinate */
      } finally {
        await close();
      }
    },
  };
}
