// torchrun's c10d dynamic rendezvous on any Store (our TcpStore for c10d, JetStream KV for nats).
// The job goes through numbered rounds; each round's keys live under r<k>/. In a round, nodes
// join in order, it closes at MAX nodes or after a last-call window once MIN have joined, node
// ranks are assigned (--node-rank first, then join order), and node 0 publishes the workers'
// MASTER_ADDR/MASTER_PORT and the job's restart count. While workers run, every node keeps itself
// alive in its round and watches for a newer round (a restart, a node lost or joining late), a
// failure reported by another node, or a node that stopped responding.
//
// Keys (under rdzv/<id>/): round (the current round), failed (the job failed: the message),
// closed (every node finished); r<k>/joined, r<k>/node/<i>, r<k>/final, r<k>/master,
// r<k>/alive/<i>, r<k>/done/<i>, r<k>/left (nodes that finished and let go of the store).
import { freePort, PrefixStore, Store, StoreError } from '@cmesh/collectives';
import { assignNodeRanks } from './node-ranks';
import { DEFAULT_CLOSE_TIMEOUT_MS, JoinReason, Rendezvous, RoundAssignment, RoundEvent, RunOptions } from './rdzv';
import { setTimeout as sleep } from 'timers/promises';

const POLL_MS = 200;

interface NodeInfo {
  nproc: number;
  addr: string;
  want: number | null;
  /** joined because its workers failed (or it lost a node): the round counts as a restart */
  failed: boolean;
}

interface Master {
  addr: string;
  port: number;
  /** restarts after failures before this round, job-wide */
  restarts: number;
}

/** The job failed on some node, or finished: nobody can join any more. */
class RendezvousClosedError extends StoreError {}

/**
 * Closes round `r` (already scoped to the round) for everyone and returns its node count.
 * `stillOpen` throws when the job ended meanwhile (failed on another node).
 */
async function closeRound(r: Store, o: RunOptions, deadline: number, stillOpen: () => Promise<void>, signal?: AbortSignal): Promise<number> {
  for (;;) {
    signal?.throwIfAborted();
    await stillOpen();
    if (await r.check(['final'])) return Number((await r.get('final')).toString());
    const count = await r.add('joined', 0);
    if (count >= o.nnodes.max) return Number((await r.compareSet('final', '', String(o.nnodes.max))).toString());
    if (count >= o.nnodes.min) {
      // last call: late joiners still get in (the round closes early once MAX have joined);
      // whoever closes first decides for everyone
      const lastCallEnd = Date.now() + o.lastCallMs;
      let n = count;
      while (Date.now() < lastCallEnd && n < o.nnodes.max && !(await r.check(['final']))) {
        signal?.throwIfAborted();
        await sleep(Math.min(POLL_MS, Math.max(0, lastCallEnd - Date.now())));
        n = await r.add('joined', 0);
      }
      return Number((await r.compareSet('final', '', String(Math.min(o.nnodes.max, n)))).toString());
    }
    if (Date.now() > deadline) {
      throw new StoreError(`rendezvous ${o.rdzvId}: only ${count} of at least ${o.nnodes.min} nodes joined within ${o.timeoutMs} ms`);
    }
    await sleep(POLL_MS);
  }
}

/** Keep-alive bookkeeping of one round: which participant stopped counting up. */
class StaleTracker {
  private readonly seen = new Map<number, { beats: number; at: number }>();
  constructor(
    private readonly r: Store,
    private readonly staleAfterMs: number,
  ) {}

  /** Participants (join indices, `me` excepted) that are neither done nor beating any more. */
  async stale(final: number, me: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < final; i++) {
      if (i === me) continue;
      const beats = await this.r.add(`alive/${i}`, 0);
      const s = this.seen.get(i);
      if (!s || s.beats !== beats) this.seen.set(i, { beats, at: Date.now() });
      else if (Date.now() - s.at > this.staleAfterMs && !(await this.r.check([`done/${i}`]))) out.push(i);
    }
    return out;
  }
}

/**
 * The rendezvous of one launcher on `store` (already scoped to this run id). `ownAddr` is how
 * other nodes reach this one; `isHost` marks the launcher that hosts the store (it leaves last);
 * `release(jobOver)` lets go of the store (jobOver: this node is the last to leave a job that finished cleanly, the state can go).
 */
export class StoreRendezvous implements Rendezvous {
  /** The round this node last took part in, and its join index there. */
  private lastRound = -1;
  private me = -1;
  private final = 0;

  constructor(
    private readonly store: Store,
    private readonly o: RunOptions,
    private readonly ownAddr: string,
    private readonly isHost: boolean,
    private readonly release: (jobOver: boolean) => Promise<void>,
  ) {}

  private roundStore(k: number): Store {
    return new PrefixStore(`r${k}`, this.store);
  }

  private get staleAfterMs(): number {
    return this.o.keepAliveIntervalMs * this.o.keepAliveMaxAttempt;
  }

  private async currentRound(): Promise<number> {
    return Number((await this.store.compareSet('round', '', '0')).toString());
  }

  private async throwIfOver(): Promise<void> {
    if (await this.store.check(['failed'])) {
      throw new RendezvousClosedError(`rendezvous ${this.o.rdzvId} is closed: ${(await this.store.get('failed')).toString().replace(/^cmesh run: /, '')}`);
    }
    if (await this.store.check(['closed']))
      throw new RendezvousClosedError(`rendezvous ${this.o.rdzvId} is closed: the job has finished (use a new --rdzv-id)`);
  }

  async next(reason: JoinReason, signal?: AbortSignal): Promise<RoundAssignment> {
    const { o } = this;
    const deadline = Date.now() + o.timeoutMs;
    for (;;) {
      signal?.throwIfAborted();
      await this.throwIfOver();
      const k = await this.currentRound();
      const r = this.roundStore(k);
      if (await r.check(['final'])) {
        const final = Number((await r.get('final')).toString());
        if (k === this.lastRound || final < o.nnodes.max) {
          // a closed round that we left, or that has room: ask for the next one (its nodes restart into it)
          await this.store.compareSet('round', String(k), String(k + 1));
          continue;
        }
        // a full round that is not ours: wait until a new round opens (torch's wait list)
        if (Date.now() > deadline)
          throw new StoreError(`rendezvous ${o.rdzvId}: round ${k} is full (${o.nnodes.max} nodes) and no new round opened within ${o.timeoutMs} ms`);
        await sleep(POLL_MS);
        continue;
      }
      const me = (await r.add('joined', 1)) - 1; // join order
      if (me >= o.nnodes.max) {
        await sleep(POLL_MS); // the round filled up under us: wait for the next
        continue;
      }
      const info: NodeInfo = { nproc: o.nprocPerNode, addr: this.ownAddr, want: o.nodeRank ?? null, failed: reason === 'failure' };
      await r.set(`node/${me}`, JSON.stringify(info));
      const final = await closeRound(r, o, deadline, () => this.throwIfOver(), signal);
      if (me >= final) continue; // it closed before we registered: the next round takes us
      this.lastRound = k;
      this.me = me;
      this.final = final;
      return this.assign(r, k, me, final);
    }
  }

  /** The restart count of the latest round before `k` that started workers (0 for the first). */
  private async restartsBefore(k: number): Promise<number> {
    for (let j = k - 1; j >= 0; j--) {
      const r = this.roundStore(j);
      if (await r.check(['master'])) return (JSON.parse((await r.get('master')).toString()) as Master).restarts;
    }
    return 0;
  }

  private async assign(r: Store, k: number, me: number, final: number): Promise<RoundAssignment> {
    const { o, store } = this;
    const infos: NodeInfo[] = [];
    for (let i = 0; i < final; i++) infos.push(JSON.parse((await r.get(`node/${i}`, o.timeoutMs)).toString()) as NodeInfo);
    const nodeRanks = assignNodeRanks(infos.map((x) => x.want));
    const nodeRank = nodeRanks[me];
    let rankOffset = 0;
    let worldSize = 0;
    infos.forEach((x, i) => {
      worldSize += x.nproc;
      if (nodeRanks[i] < nodeRank) rankOffset += x.nproc;
    });
    // node 0 picks a free port for the workers' store (its local rank 0, global rank 0, hosts it)
    // and counts the restarts: one more when a node entered this round because of a failure
    if (nodeRank === 0) {
      const restarts = (await this.restartsBefore(k)) + (infos.some((x) => x.failed) ? 1 : 0);
      const master: Master = { addr: this.ownAddr, port: await freePort(this.ownAddr), restarts };
      await r.set('master', JSON.stringify(master));
    }
    const master = JSON.parse((await r.get('master', o.timeoutMs)).toString()) as Master;

    const stale = new StaleTracker(r, this.staleAfterMs);
    const staleMessage = (i: number) => `cmesh run: node ${nodeRanks[i]} stopped responding (no keep-alive for ${this.staleAfterMs} ms)`;
    // beat often enough that a live node never looks stale between two checks of the others
    const beatEveryMs = Math.max(1, Math.min(POLL_MS, o.keepAliveIntervalMs / 4));
    let lastBeat = 0;
    let lastStaleCheck = Date.now();
    let errors = 0;
    const check = async (): Promise<RoundEvent | undefined> => {
      try {
        if (Date.now() - lastBeat >= beatEveryMs) {
          await r.add(`alive/${me}`, 1);
          lastBeat = Date.now();
        }
        if (await store.check(['failed'])) {
          const message = (await store.get('failed')).toString();
          return { kind: 'failed', message: message.startsWith('cmesh run:') ? message : `cmesh run: stopped because ${message}` };
        }
        const current = Number((await store.get('round')).toString());
        if (current > k) {
          return {
            kind: 'new-round',
            message: `cmesh run: rendezvous round ${current} opened (a node failed, was lost or joined); restarting the workers of node ${nodeRank}`,
          };
        }
        if (Date.now() - lastStaleCheck >= o.keepAliveIntervalMs) {
          lastStaleCheck = Date.now();
          const dead = await stale.stale(final, me);
          if (dead.length) return { kind: 'node-lost', message: staleMessage(dead[0]) };
        }
        errors = 0;
      } catch (err) {
        // the store went away (its host died): nobody can coordinate this run any more
        if (++errors >= o.keepAliveMaxAttempt) return { kind: 'failed', message: `cmesh run: lost the rendezvous store: ${(err as Error).message}` };
      }
      return undefined;
    };

    return {
      round: k,
      nodeRank,
      nnodes: final,
      worldSize,
      rankOffset,
      masterAddr: master.addr,
      masterPort: master.port,
      restartCount: master.restarts,
      check,
      requestRestart: async () => {
        await store.compareSet('round', String(k), String(k + 1));
      },
    };
  }

  async reportFailure(message: string): Promise<void> {
    await this.store.compareSet('failed', '', message).catch(() => undefined);
  }

  /** True when every node of the latest round is done and it is this node's round: the job is over. */
  private async allDone(): Promise<boolean> {
    const k = await this.currentRound();
    if (k !== this.lastRound) return false;
    return this.store.check([...Array(this.final).keys()].map((i) => `r${k}/done/${i}`));
  }

  async finish(outcome: 'succeeded' | 'failed'): Promise<void> {
    let jobOver = false;
    try {
      if (this.lastRound >= 0) await this.roundStore(this.lastRound).set(`done/${this.me}`, outcome);
      if (outcome === 'succeeded' && (await this.allDone())) await this.store.set('closed', '1');
      if (this.isHost) await this.serveUntilOver();
      jobOver = await this.leave();
    } catch {
      /* the store is gone: nothing left to coordinate */
    } finally {
      // the host closes its store once it saw every node done: a last set of ours it never
      // answered (the store's close reports it) changes nothing for this node's result
      await this.release(jobOver).catch(() => undefined);
    }
  }

  /**
   * Counts this node out of its last round, its last use of the store. True for the last node of
   * the round to leave a job that finished cleanly: only it may delete the store. Nodes that
   * finish together all see every node done, and one that deleted the store at once would leave
   * the others' last writes waiting on a store that is gone.
   */
  private async leave(): Promise<boolean> {
    if (this.lastRound < 0) return false;
    const left = await this.roundStore(this.lastRound).add('left', 1);
    return left >= this.final && (await this.store.check(['closed']));
  }

  /**
   * The host keeps the store until the job is over: every node of the latest round done, a
   * failure that had close_timeout to reach every node, the remaining nodes all lost, or a round
   * that made no progress for the join timeout.
   */
  private async serveUntilOver(): Promise<void> {
    const { o } = this;
    const closeTimeoutMs = o.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
    let failedAt: number | undefined;
    let progress = '';
    let progressAt = Date.now();
    const trackers = new Map<number, StaleTracker>();
    for (;;) {
      if (await this.store.check(['closed'])) return;
      if (failedAt === undefined && (await this.store.check(['failed']))) failedAt = Date.now();
      if (failedAt !== undefined && Date.now() - failedAt > closeTimeoutMs) return;
      const k = await this.currentRound();
      const r = this.roundStore(k);
      if (k === this.lastRound) await r.add(`alive/${this.me}`, 1);
      const now = `${k}/${await r.add('joined', 0)}`;
      if (now !== progress) {
        progress = now;
        progressAt = Date.now();
      }
      if (await r.check(['final'])) {
        const final = Number((await r.get('final')).toString());
        const notDone: number[] = [];
        for (let i = 0; i < final; i++) if (!(await r.check([`done/${i}`]))) notDone.push(i);
        if (!notDone.length) {
          if (failedAt !== undefined) return;
          await this.store.set('closed', '1');
          return;
        }
        if (!trackers.has(k)) trackers.set(k, new StaleTracker(r, this.staleAfterMs));
        const stale = await trackers.get(k)!.stale(final, k === this.lastRound ? this.me : -1);
        if (notDone.every((i) => stale.includes(i))) return;
      } else if (Date.now() - progressAt > o.timeoutMs) {
        return;
      }
      await sleep(POLL_MS);
    }
  }
}
