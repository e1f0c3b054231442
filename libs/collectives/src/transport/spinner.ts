// Bounded busy-polling for the data plane. A Node process waiting for a message sleeps in epoll,
// and waking it costs tens of microseconds (about 50 µs on a small VM: a two-process ping-pong
// takes ~100 µs a round trip, ~45 µs while spinning). While a pending setImmediate exists libuv
// polls with a zero timeout instead of sleeping, so every transfer keeps the loop turning for a
// short budget after it starts: replies that come quickly are seen at once, long waits still sleep.
// Only small transfers spin: for large ones the wake-up is amortised, and a spinning process would
// take CPU from the kernel's copies and from peers on the same cores. Like Open MPI's
// mpi_yield_when_idle, nothing spins when the node is oversubscribed (more local ranks than
// cores): a spinning rank would take the core its peer needs to send (4 ranks on 2 cores: 3-10x
// slower). CMESH_SPIN_US sets the budget explicitly (0 turns it off).
import * as os from 'os';
import { performance } from 'perf_hooks';
import { isOversubscribed, localRanks } from '../oversubscription';

export const DEFAULT_SPIN_US = 200;
/**
 * Over shared memory, ranks that share cores still poll, yielding the core each turn (Open MPI's
 * mpi_yield_when_idle): a turn costs no system call but sched_yield, and a peer that is runnable
 * gets the core. 4 ranks on 2 cores, 8 B allReduce: about 2-3x faster than sleeping in epoll.
 */
export const YIELDING_SPIN_US = 1000;
/** Transfers larger than this do not spin. */
const SPIN_MAX_BYTES = 64 * 1024;

/** Memory the spinning loop reads itself (the shared-memory rings), instead of waiting for a wake-up. */
export interface Poller {
  /** The loop starts spinning: peers need not wake it. */
  begin(): void;
  poll(): void;
  /** The loop stops spinning: peers must wake it again (and what came meanwhile is read). */
  end(): void;
}

export class Spinner {
  private until = 0;
  private active = false;
  poller?: Poller;

  constructor(
    private readonly budgetMs: number,
    /** the ranks share cores: the poller gives the core away each turn */
    readonly yields = false,
  ) {}

  /** CMESH_SPIN_US, else the default when LOCAL_WORLD_SIZE ranks fit on this machine's cores, else off. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, cores = os.availableParallelism()): Spinner {
    const raw = env.CMESH_SPIN_US;
    let us = Number(raw);
    if (raw === undefined || raw === '' || !Number.isFinite(us)) {
      us = localRanks(env) !== undefined && !isOversubscribed(env, cores) ? DEFAULT_SPIN_US : 0;
    }
    return new Spinner(us > 0 ? us / 1000 : 0);
  }

  /**
   * The spinner for a rank whose peers are on shared memory: as fromEnv, but ranks that share
   * cores poll too, yielding each turn (YIELDING_SPIN_US), unless CMESH_SPIN_US says otherwise.
   */
  static forShm(env: NodeJS.ProcessEnv = process.env, cores = os.availableParallelism()): Spinner {
    const raw = env.CMESH_SPIN_US;
    const explicit = raw !== undefined && raw !== '' && Number.isFinite(Number(raw));
    if (!explicit && localRanks(env) !== undefined && isOversubscribed(env, cores)) return new Spinner(YIELDING_SPIN_US / 1000, true);
    return Spinner.fromEnv(env, cores);
  }

  get budgetUs(): number {
    return this.budgetMs * 1000;
  }

  /** A transfer of `bytes` starts: small ones keep the loop turning for the budget from now. */
  kick(bytes: number): void {
    if (this.budgetMs === 0 || bytes > SPIN_MAX_BYTES) return;
    this.until = performance.now() + this.budgetMs;
    if (!this.active) {
      this.active = true;
      this.poller?.begin();
      setImmediate(this.spin);
    }
  }

  private readonly spin = (): void => {
    this.poller?.poll();
    if (performance.now() < this.until) setImmediate(this.spin);
    else {
      this.active = false;
      this.poller?.end();
    }
  };
}
