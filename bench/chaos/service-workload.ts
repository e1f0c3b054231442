// The soak's service tenants: pairs of members (collectives as a service, @cmesh/client) logged
// in as the mesh's client user, each pair joining a fresh two-member group, running a stream of
// allReduces on it (every element of every result checked) and leaving, again and again while
// the faults are made. A group that fails is closed and the pair joins a new one. One member of a
// pair sends its data through its agent's local path, the other over NATS. Every call is watched:
// one that neither resolves nor rejects well after its own deadline is recorded as hung.
import { CmeshError, MeshConnection, ServiceGroup, connectMesh } from '@cmesh/client';
import { setTimeout as sleep } from 'timers/promises';

/** What became of one member's call. */
export type ServiceOutcome = 'correct' | 'wrong' | 'typed' | 'untyped' | 'hung';

export interface ServiceCall {
  pair: number;
  /** the group's name (a pair's n-th group) */
  group: string;
  rank: number;
  /** 'join', or the op with its dtype and element count */
  what: string;
  /**
   * From when a fault can have caused this call's failure: for a join, when the pair asked for the
   * group; for an op, when the group was placed (a group that ran ops since a fault did not die of it)
   */
  openFrom: number;
  startedAt: number;
  endedAt: number;
  /** the agents that served the group (unknown for a join that failed) */
  agents: string[];
  outcome: ServiceOutcome;
  /** the error's name and message, or the first wrong element */
  detail?: string;
}

export interface ServiceWorkloadOptions {
  /** the NATS servers, comma-separated */
  servers: string;
  user: string;
  pass: string;
  pairs: number;
  /** how long a pair keeps a group (its allReduces one after another) before it leaves and joins another, ms */
  groupMs: number;
  /** pause between a pair's allReduces, ms (the pair is one tenant among the jobs, not a load test) */
  opGapMs: number;
  /** an op's deadline (the agents' and the client's, which waits 5 s more) */
  opTimeoutMs: number;
  /** a join's deadline */
  joinTimeoutMs: number;
  /** one line per group: placed after how long, ops run, how it ended */
  log?: (line: string) => void;
}

/** A call still unsettled this long after its own deadline (client grace included) is hung. */
const HUNG_AFTER_MS = 15_000;
const CLIENT_GRACE_MS = 5_000;

const DTYPES = [
  { name: 'float32', make: (n: number) => new Float32Array(n) },
  { name: 'int32', make: (n: number) => new Int32Array(n) },
  { name: 'float64', make: (n: number) => new Float64Array(n) },
] as const;
const REDOPS = ['sum', 'max', 'min'] as const;
const COUNTS = [1, 100, 4096, 16_384];

/** Rank r's element k of the pair's n-th op: small integers, exact in every dtype used. */
const input = (r: number, n: number, k: number) => ((k * 7 + n * 13 + r * 31) % 1000) - 500;
const reduce = (op: (typeof REDOPS)[number], a: number, b: number) => (op === 'sum' ? a + b : op === 'max' ? Math.max(a, b) : Math.min(a, b));

type Watched<T> = { ok: true; value: T } | { ok: false; error: unknown } | { hung: true };

/** `p` settled, or { hung } when it has not within `ms` (it may still settle later). */
function watch<T>(p: Promise<T>, ms: number): Promise<Watched<T>> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ hung: true }), ms);
    p.then(
      (value) => (clearTimeout(timer), resolve({ ok: true, value })),
      (error) => (clearTimeout(timer), resolve({ ok: false, error })),
    );
  });
}

function describeError(e: unknown): { outcome: 'typed' | 'untyped'; detail: string } {
  const err = e as Error;
  // typed: an error class of the library (its name and code say what and who)
  return { outcome: e instanceof CmeshError ? 'typed' : 'untyped', detail: `${err?.name ?? typeof e}: ${err?.message ?? String(e)}` };
}

export class ServiceWorkload {
  readonly calls: ServiceCall[] = [];
  /** groups placed (both members joined) */
  groups = 0;
  private stopping = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly o: ServiceWorkloadOptions,
    private readonly rng: () => number,
  ) {}

  start(): void {
    for (let p = 0; p < this.o.pairs; p++) this.loops.push(this.pair(p));
  }

  /** Lets every pair finish its current op, leave and disconnect. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }

  /** One group, one op, no faults: the service path has run once before the faults start. */
  async warmUp(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let tries = 0; ; tries++) {
      const before = this.calls.length;
      const conns = await Promise.all([0, 1].map((r) => this.connect(r)));
      try {
        const ok = await this.round(-1, `soak-warmup-${tries}`, conns, 0);
        if (ok) return;
        const why = this.calls.slice(before).find((c) => c.outcome !== 'correct');
        if (Date.now() > deadline) throw new Error(`service warm-up: ${why?.what} ${why?.outcome}: ${why?.detail}`);
      } finally {
        // warm-up calls and groups are not the soak's
        this.calls.splice(before);
        this.groups = 0;
        for (const c of conns) await c.close();
      }
    }
  }

  /** Member `rank`'s connection: member 0 sends its data through the agent's local path, member 1 over NATS. */
  private connect(rank: number): Promise<MeshConnection> {
    const { servers, user, pass } = this.o;
    // a long-lived tenant: it rides out a nats-server restart however long it takes
    return connectMesh({
      servers: servers.split(','),
      user,
      pass,
      local: rank === 0,
      nats: { maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 5000 },
    });
  }

  private async pair(p: number): Promise<void> {
    let conns: MeshConnection[] = [];
    for (let n = 0; !this.stopping; n++) {
      // a connection closed for good (it cannot be, with endless reconnects, but a new one costs nothing)
      if (conns.length !== 2 || conns.some((c) => c.nc.isClosed())) {
        for (const c of conns) await c.close();
        conns = [];
        try {
          conns = await Promise.all([0, 1].map((r) => this.connect(r)));
        } catch {
          await sleep(250); // the nats-server is down: the tenant tries again
          continue;
        }
      }
      const ok = await this.round(p, `soak-${p}-${n}`, conns, this.o.groupMs);
      // after a failure the tenant backs off a little, as a user's retry would
      await sleep(ok ? 100 : 1000);
    }
    for (const c of conns) await c.close();
  }

  /** Both members join `name`, run allReduces for `forMs` (at least one) and leave; false when anything failed. */
  private async round(pair: number, name: string, conns: MeshConnection[], forMs: number): Promise<boolean> {
    const groupFrom = Date.now();
    const joins = conns.map((c, rank) => c.join(name, { size: 2, label: `pair ${pair} member ${rank}`, timeout: this.o.joinTimeoutMs }));
    const watched = await Promise.all(joins.map((j) => watch(j, this.o.joinTimeoutMs + HUNG_AFTER_MS)));
    const groups: ServiceGroup[] = [];
    watched.forEach((w, i) => {
      const call: ServiceCall = {
        pair,
        group: name,
        rank: i,
        what: 'join',
        openFrom: groupFrom,
        startedAt: groupFrom,
        endedAt: Date.now(),
        agents: [],
        outcome: 'correct',
      };
      if ('hung' in w) {
        call.outcome = 'hung';
        // should it ever be placed: leave at once
        void joins[i].then(
          (g) => g.leave(),
          () => undefined,
        );
      } else if (w.ok) {
        groups[i] = w.value;
        call.agents = w.value.placed.members.map((m) => m.agentName);
      } else Object.assign(call, describeError(w.error));
      this.calls.push(call);
    });
    if (groups.filter(Boolean).length !== 2) {
      this.o.log?.(
        `service: ${name}: not placed after ${Date.now() - groupFrom} ms: ${this.calls
          .slice(-2)
          .map((c) => c.detail ?? c.outcome)
          .join('; ')}`,
      );
      for (const g of groups) await g?.leave().catch(() => undefined);
      return false;
    }
    this.groups++;
    const agents = groups[0].placed.members.map((m) => m.agentName);
    const placedAt = Date.now();
    let ok = true;
    let n = 0;
    for (; ok && (n === 0 || (Date.now() - placedAt < forMs && !this.stopping)); n++) {
      if (n) await sleep(this.o.opGapMs);
      ok = await this.op(pair, name, groups, agents, placedAt, n);
    }
    const last = this.calls[this.calls.length - 1];
    this.o.log?.(
      `service: ${name} on ${agents.join(', ')} (${groups.map((g) => g.transport).join(', ')}): placed after ${placedAt - groupFrom} ms, ${n} allReduces in ${Date.now() - placedAt} ms${ok ? '' : `, ended by ${last.outcome}: ${last.detail}`}`,
    );
    if (ok) for (const g of groups) await g.leave().catch(() => undefined);
    // a failed group is closed: what it still had pending fails here, nothing waits on it
    else for (const g of groups) g.close();
    return ok;
  }

  /** One allReduce by both members, each result checked element by element. */
  private async op(pair: number, group: string, gs: ServiceGroup[], agents: string[], placedAt: number, n: number): Promise<boolean> {
    const dtype = DTYPES[Math.floor(this.rng() * DTYPES.length)];
    const redop = REDOPS[Math.floor(this.rng() * REDOPS.length)];
    const count = COUNTS[Math.floor(this.rng() * COUNTS.length)];
    const what = `allReduce ${redop} ${dtype.name}[${count}]`;
    const tensors = gs.map((_, r) => {
      const t = dtype.make(count);
      for (let k = 0; k < count; k++) t[k] = input(r, n, k);
      return t;
    });
    const startedAt = Date.now();
    const runs = gs.map((g, r) =>
      watch(g.allReduce(tensors[r], { op: redop, timeout: this.o.opTimeoutMs }), this.o.opTimeoutMs + CLIENT_GRACE_MS + HUNG_AFTER_MS),
    );
    const results = await Promise.all(runs);
    let ok = true;
    results.forEach((w, r) => {
      const call: ServiceCall = { pair, group, rank: r, what, openFrom: placedAt, startedAt, endedAt: Date.now(), agents, outcome: 'correct' };
      if ('hung' in w) call.outcome = 'hung';
      else if (!w.ok) Object.assign(call, describeError(w.error));
      else {
        const t = tensors[r];
        for (let k = 0; k < count; k++) {
          const want = reduce(redop, input(0, n, k), input(1, n, k));
          if (t[k] !== want) {
            call.outcome = 'wrong';
            call.detail = `element ${k} of ${count} is ${t[k]}, want ${want}`;
            break;
          }
        }
      }
      if (call.outcome !== 'correct') ok = false;
      this.calls.push(call);
    });
    return ok;
  }
}
