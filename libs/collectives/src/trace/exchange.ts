// At a timeout, ranks learn what their peers are doing through the group's store, as torch's
// watchdog does (it sets a store key that every rank's monitor thread polls): the rank that timed
// out bumps a request counter and waits, for a short bounded time, for every member's summary;
// every rank polls the counter (a read-only store round trip every pollMs until a first request,
// on an unref'd timer: it never keeps a program alive) and answers with its summary whatever it
// is doing, in a collective or not, as long as its event loop runs. A rank that is gone, stopped
// or spinning does not answer.
import { InvalidArgumentError } from '../errors';
import type { Store } from '../store';
import type { TraceDump } from './dump';

export const TRACE_EXCHANGE_ENV = 'CMESH_TRACE_EXCHANGE_MS';
export const DEFAULT_TRACE_EXCHANGE_MS = 2000;
const REQUEST_KEY = 'cmesh/trace/request';
const summaryKey = (rank: number) => `cmesh/trace/summary/${rank}`;

interface Posted {
  gen: number;
  dump: TraceDump;
}

export class TraceExchange {
  private timer?: NodeJS.Timeout;
  private answered = 0;
  private polling = false;
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly rank: number,
    private readonly summary: () => TraceDump,
    /** called when a peer asked (the rank dumps its file too, when a dump directory is set) */
    private readonly onRequest: () => void,
    /** how long a timed-out rank waits for answers */
    readonly deadlineMs: number,
    readonly pollMs = Math.max(50, Math.min(500, Math.floor(deadlineMs / 4))),
  ) {}

  start(): void {
    if (this.deadlineMs <= 0 || this.timer) return;
    this.timer = setInterval(() => void this.poll(), this.pollMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      // reads only (no key is made, nothing written) until a rank has asked
      if (!(await this.store.check([REQUEST_KEY]))) return;
      const gen = Number(String(await this.store.get(REQUEST_KEY)));
      if (gen > this.answered && !this.closed) {
        this.answered = gen;
        await this.post(gen);
        this.onRequest();
      }
    } catch {
      // the store is gone or busy: nothing to answer now; a timed-out peer reports us as silent
    } finally {
      this.polling = false;
    }
  }

  private async post(gen: number): Promise<void> {
    const posted: Posted = { gen, dump: this.summary() };
    await this.store.set(summaryKey(this.rank), JSON.stringify(posted));
  }

  /**
   * Asks every rank in `ranks` for its summary and returns those that answered within the deadline
   * (ours included). Never throws: a store that fails gives what was gathered.
   */
  async collect(ranks: readonly number[]): Promise<TraceDump[]> {
    const got = new Map<number, TraceDump>();
    if (this.deadlineMs <= 0 || this.closed) return [];
    const deadline = Date.now() + this.deadlineMs;
    try {
      const gen = await this.store.add(REQUEST_KEY, 1);
      this.answered = Math.max(this.answered, gen);
      await this.post(gen);
      while (Date.now() < deadline && !this.closed) {
        for (const r of ranks) {
          if (got.has(r)) continue;
          const key = summaryKey(r);
          if (!(await this.store.check([key]))) continue;
          const posted = JSON.parse(String(await this.store.get(key, Math.max(1, deadline - Date.now())))) as Posted;
          if (posted.gen >= gen) got.set(r, posted.dump);
        }
        if (got.size === ranks.length) break;
        await new Promise((r) => setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now()))));
      }
    } catch {
      // report what arrived
    }
    return [...got.values()];
  }

  stop(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** CMESH_TRACE_EXCHANGE_MS: how long a timed-out rank waits for its peers' summaries (0: no exchange). */
export function traceExchangeMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[TRACE_EXCHANGE_ENV];
  if (raw === undefined || raw.trim() === '') return DEFAULT_TRACE_EXCHANGE_MS;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 600_000)
    throw new InvalidArgumentError(`${TRACE_EXCHANGE_ENV} must be an integer number of ms in [0, 600000], got ${JSON.stringify(raw)}`);
  return n;
}
