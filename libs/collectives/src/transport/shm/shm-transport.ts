// Sets up the shared-memory rings between the ranks of one host, through the store, once the TCP
// mesh is connected (its connections stay as the liveness channel: a dead peer's socket closes,
// and shared memory has no such event). Per rank:
//   1. publish host identity; the ranks with the same one are local peers
//   2. make this rank's segment (memfd: no name anywhere, gone with the last mapping) and
//      publish how to open it (pid, fd, size, a random nonce written in its header), or why not
//   3. map every local peer's segment and publish which ones this rank mapped
//   4. a pair talks over shared memory when both mapped each other's; close the memfd (every peer
//      that will has mapped it by then)
// With `shm` any pair left on TCP is a TransportUnavailableError; with `auto` it is a debug line.
import { randomBytes } from 'crypto';
import * as os from 'os';
import { debug, debugOn } from '../../debug';
import { TransportUnavailableError } from '../../errors';
import type { Store } from '../../store/store';
import {
  HEADER_BYTES,
  H_MAGIC,
  H_NONCE,
  H_RANK,
  H_RING,
  H_SLOTS,
  H_VERSION,
  MAGIC,
  NONCE_BYTES,
  FAST_REGION_BYTES,
  F_CTRL_BYTES,
  VERSION,
  ringBytesFor,
  segmentBudget,
  segmentBytes,
} from './layout';
import { ShmLink } from './link';
import { ShmAddon, loadShmAddon } from './native';
import { Segment } from './segment';
import { FastGroup, FastOptions, FastRegion } from './fast';
import type { Poller } from '../spinner';
import { TransportMode, hostIdentity } from './select';

interface HostInfo {
  host: string;
  pid: number;
}
type SegmentInfo = { fd: number; bytes: number; ring: number; nonce: string; doorbell: number } | { error: string };

export interface ShmSetupOptions {
  rank: number;
  size: number;
  store: Store;
  timeoutMs: number;
  mode: Exclude<TransportMode, 'tcp'>;
  /** this rank's host identity (default hostIdentity()) */
  host?: string;
}

async function getJson<T>(store: Store, key: string, timeoutMs: number): Promise<T> {
  return JSON.parse((await store.get(key, timeoutMs)).toString('utf8')) as T;
}

export class ShmTransport {
  private poll?: object;
  private closed = false;
  /** The loop busy-polls (Spinner): no wake-ups wanted meanwhile. */
  private spinning = false;
  /** A synchronous small collective runs: no wake-ups wanted until the loop turns. */
  private held = false;
  /** The small-collective path, once a group has claimed it. */
  private fast?: FastGroup;
  private fastClaimed = false;

  private constructor(
    private readonly addon: ShmAddon,
    private readonly mine: Segment,
    /** this rank's doorbell pipe */
    private readonly doorbell: { readFd: number; writeFd: number },
    /** world rank -> link */
    readonly links: Map<number, ShmLink>,
    /** the peers' doorbells this rank opened */
    private readonly peerDoorbells: number[],
    /** "a,b" (a < b) for every pair of ranks on this host that talks over shared memory */
    readonly pairs: ReadonlySet<string>,
    /** this rank's world rank, and the peers' segments (with their pids) by world rank */
    private readonly rank: number,
    private readonly peerSegs: ReadonlyMap<number, { seg: Segment; pid: number }>,
  ) {
    for (const [peer, link] of links) link.onClose = (err) => this.fast?.peerGone(peer, err);
  }

  /** The rings to this rank's local peers, or undefined when none is on shared memory. */
  static async setup(o: ShmSetupOptions): Promise<ShmTransport | undefined> {
    const { rank, size, store, timeoutMs, mode } = o;
    const others = [...Array(size).keys()].filter((r) => r !== rank);
    const me: HostInfo = { host: o.host ?? hostIdentity(), pid: process.pid };
    await store.set(`mesh/shm-host/${rank}`, JSON.stringify(me));
    const hosts = new Map<number, HostInfo>(
      await Promise.all(others.map(async (r) => [r, await getJson<HostInfo>(store, `mesh/shm-host/${r}`, timeoutMs)] as const)),
    );
    const local = others.filter((r) => hosts.get(r)!.host === me.host);
    const remote = others.filter((r) => !local.includes(r));
    // every rank fails alike; none leaves before the others have read what they need (rank 0's
    // exit may take the store with it)
    const failTogether = async (err: Error): Promise<never> => {
      await store.set(`mesh/shm-failed/${rank}`, '1');
      await store
        .wait(
          others.map((r) => `mesh/shm-failed/${r}`),
          timeoutMs,
        )
        .catch(() => {});
      throw err;
    };
    if (mode === 'shm' && remote.length) {
      return failTogether(
        new TransportUnavailableError(
          `CMESH_TRANSPORT=shm: ranks [${remote.join(', ')}] are on another host (or in another PID or network namespace) than rank ${rank}; use auto or tcp`,
          { rank, peers: remote },
        ),
      );
    }
    if (!local.length) {
      if (debugOn) debug('shm', 'no other rank on this host: TCP only');
      return undefined;
    }

    // 2. this rank's segment
    let addon: ShmAddon | undefined;
    let mine: { fd: number; buffer: ArrayBuffer } | undefined;
    let doorbell: { readFd: number; writeFd: number } | undefined;
    let info: SegmentInfo;
    const nonce = randomBytes(NONCE_BYTES);
    try {
      addon = loadShmAddon();
      const budget = segmentBudget();
      const ring = ringBytesFor(local.length, budget);
      if (!ring) throw new Error(`CMESH_SHM_BYTES=${budget} is too small for rings to ${local.length} local peers`);
      const bytes = segmentBytes(local.length, ring);
      mine = addon.createSegment(bytes);
      doorbell = addon.createDoorbell();
      const h = Buffer.from(mine.buffer, 0, HEADER_BYTES);
      h.writeUInt32LE(VERSION, H_VERSION);
      h.writeUInt32LE(rank, H_RANK);
      h.writeUInt32LE(local.length, H_SLOTS);
      h.writeUInt32LE(ring, H_RING);
      nonce.copy(h, H_NONCE);
      h.writeUInt32LE(MAGIC, H_MAGIC);
      info = { fd: mine.fd, bytes, ring, nonce: nonce.toString('hex'), doorbell: doorbell.writeFd };
    } catch (e) {
      info = { error: (e as Error).message };
      if (mine) addon!.closeFd(mine.fd);
      mine = undefined;
    }
    await store.set(`mesh/shm-seg/${rank}`, JSON.stringify(info));

    // 3. the local peers' segments
    const segs = new Map<number, { seg: Segment; ring: number }>();
    const why = new Map<number, string>();
    if ('error' in info) for (const r of local) why.set(r, `rank ${rank} has no segment: ${info.error}`);
    await Promise.all(
      local.map(async (r) => {
        const theirs = await getJson<SegmentInfo>(store, `mesh/shm-seg/${r}`, timeoutMs);
        if ('error' in theirs) return void why.set(r, `rank ${r} has no segment: ${theirs.error}`);
        if (!addon || !mine) return;
        let bell = -1;
        try {
          const buf = addon.openSegment(hosts.get(r)!.pid, theirs.fd, theirs.bytes);
          const h = Buffer.from(buf, 0, HEADER_BYTES);
          if (
            h.readUInt32LE(H_MAGIC) !== MAGIC ||
            h.readUInt32LE(H_RANK) !== r ||
            h.subarray(H_NONCE, H_NONCE + NONCE_BYTES).toString('hex') !== theirs.nonce
          ) {
            throw new Error('its header does not match what it published');
          }
          bell = addon.openDoorbell(hosts.get(r)!.pid, theirs.doorbell);
          segs.set(r, { seg: new Segment(addon, buf, bell), ring: theirs.ring });
        } catch (e) {
          if (bell >= 0) addon.closeFd(bell);
          why.set(r, `rank ${rank} could not map rank ${r}'s segment: ${(e as Error).message}`);
        }
      }),
    );
    await store.set(`mesh/shm-ok/${rank}`, JSON.stringify([...segs.keys()]));

    // 4. pairs that mapped each other; every local rank reads every local rank's list, so all
    // of them know every pair of this host alike (the cost model needs one answer per group)
    const paired: number[] = [];
    const mapped = new Map<number, number[]>([[rank, [...segs.keys()]]]);
    await Promise.all(
      local.map(async (r) => {
        const ok = await getJson<number[]>(store, `mesh/shm-ok/${r}`, timeoutMs);
        mapped.set(r, ok);
        if (segs.has(r) && ok.includes(rank)) paired.push(r);
        else if (!why.has(r)) why.set(r, `rank ${r} could not map rank ${rank}'s segment`);
      }),
    );
    const pairs = new Set<string>();
    for (const [a, list] of mapped) for (const b of list) if (a < b && mapped.get(b)?.includes(a)) pairs.add(`${a},${b}`);
    if (mine) addon!.closeFd(mine.fd);
    paired.sort((a, b) => a - b);
    const left = local.filter((r) => !paired.includes(r));
    if (left.length) {
      const reasons = left.map((r) => why.get(r)!);
      if (mode === 'shm') {
        return failTogether(
          new TransportUnavailableError(
            `CMESH_TRANSPORT=shm: no shared memory between rank ${rank} and ranks [${left.join(', ')}]: ${[...new Set(reasons)].join('; ')}`,
            { rank, peers: left },
          ),
        );
      }
      if (debugOn) debug('shm', `TCP to ranks [${left.join(', ')}] on this host instead of shared memory: ${[...new Set(reasons)].join('; ')}`);
    }
    for (const [r, { seg }] of segs) if (!paired.includes(r)) addon!.closeFd(seg.doorbell);
    if (!paired.length) {
      if (doorbell) for (const fd of [doorbell.readFd, doorbell.writeFd]) addon!.closeFd(fd);
      return undefined;
    }
    const own = new Segment(addon!, mine!.buffer);
    const ring = (info as { ring: number }).ring;
    const links = new Map<number, ShmLink>();
    for (const r of paired) {
      // slots follow rank order among each owner's local peers; host identity is the same for all
      const theirLocal = [rank, ...local].filter((x) => x !== r).sort((a, b) => a - b);
      const s = segs.get(r)!;
      links.set(r, new ShmLink(r, own, local.indexOf(r), ring, s.seg, theirLocal.indexOf(rank), s.ring));
    }
    if (debugOn) debug('shm', `shared memory with ranks [${paired.join(', ')}]: ${ring} B rings, segment ${(info as { bytes: number }).bytes} B`);
    const peerSegs = new Map(paired.map((r) => [r, { seg: segs.get(r)!.seg, pid: hosts.get(r)!.pid }]));
    return new ShmTransport(
      addon!,
      own,
      doorbell!,
      links,
      paired.map((r) => segs.get(r)!.seg.doorbell),
      pairs,
      rank,
      peerSegs,
    );
  }

  /** Starts reading the rings: the event loop polls this rank's doorbell. */
  start(): void {
    this.poll = this.addon.startPoll(this.doorbell.readFd, this.onWake);
    this.rearm();
  }

  private readonly onWake = (): void => {
    this.service();
    this.rearm();
  };

  /**
   * The small-collective path (fast.ts) for a group of these world ranks (this one among them),
   * when every other one is on shared memory with this rank. One group holds it: the first that
   * asks (every rank makes its groups in the same order, so all claim it for the same group).
   */
  fastGroup(worldRanks: readonly number[], opts: Pick<FastOptions, 'aborted'>, env: NodeJS.ProcessEnv = process.env): FastGroup | undefined {
    const me = worldRanks.indexOf(this.rank);
    if (this.fastClaimed || this.closed || me < 0 || worldRanks.length < 2 || !worldRanks.every((r) => r === this.rank || this.links.has(r))) return undefined;
    this.fastClaimed = true;
    const region = (seg: Segment): FastRegion => {
      const at = seg.buffer.byteLength - FAST_REGION_BYTES;
      return { bytes: Buffer.from(seg.buffer, at, FAST_REGION_BYTES), i32: new Int32Array(seg.buffer, at, F_CTRL_BYTES >> 2) };
    };
    const peers = worldRanks.filter((r) => r !== this.rank).map((r) => this.peerSegs.get(r)!);
    const handle = this.addon.fastOpen(
      this.mine.buffer,
      this.mine.buffer.byteLength - FAST_REGION_BYTES,
      peers.map((p) => [p.seg.buffer, p.seg.buffer.byteLength - FAST_REGION_BYTES, p.seg.doorbell]),
    );
    const regions = worldRanks.map((r) => region(r === this.rank ? this.mine : this.peerSegs.get(r)!.seg));
    this.fast = new FastGroup(this.addon, handle, regions, me, worldRanks, {
      ...fastWaitPolicy(
        worldRanks.length,
        peers.some((p) => p.pid === process.pid),
        env,
      ),
      ...opts,
      holdWakeups: this.hold,
    });
    return this.fast;
  }

  /** Until the loop turns, peers need not ring this rank's doorbell: it is looking itself. */
  private readonly hold = (): void => {
    if (this.held || this.spinning || this.closed) return;
    this.held = true;
    this.mine.disarm();
    setImmediate(this.release);
  };

  private readonly release = (): void => {
    this.held = false;
    this.rearm();
  };

  /** Asks to be woken, then looks once more (Dekker with the producers: they write, then read the flag). */
  private rearm(): void {
    if (this.spinning || this.closed) return;
    this.mine.arm();
    this.service();
  }

  /**
   * For the busy-polling loop (Spinner): while it spins, producers make no wake-up calls. With
   * `yields` (ranks share cores) each turn gives the core to a runnable peer first.
   */
  poller(yields: boolean): Poller {
    return {
      begin: () => {
        this.spinning = true;
        this.mine.disarm();
      },
      poll: yields
        ? () => {
            this.addon.yield();
            this.service();
          }
        : this.service,
      end: () => {
        this.spinning = false;
        this.rearm();
      },
    };
  }

  /** Reads every inbound ring and writes what waits for room in the outbound ones. */
  readonly service = (): void => {
    if (this.closed) return;
    for (const l of this.links.values()) {
      l.poll();
      l.flush();
    }
    // after the rings: an abort a peer sent for the op in flight has been read
    this.fast?.poll();
  };

  close(err: Error): void {
    if (this.closed) return;
    this.closed = true;
    if (this.poll) this.addon.stopPoll(this.poll);
    for (const fd of [this.doorbell.readFd, this.doorbell.writeFd, ...this.peerDoorbells]) this.addon.closeFd(fd);
    for (const l of this.links.values()) l.close(err);
    this.fast?.close(err);
  }
}

/**
 * How long a collective over flags waits for its peers inside the call before it waits on the
 * event loop: it spins for FAST_SPIN_US (CMESH_SPIN_US) when every local rank has a core of its
 * own, then sleeps on the awaited peer's futex (its post wakes this thread in microseconds; an
 * event-loop wake-up costs tens) up to FAST_SLEEP_US. Ranks that share cores do not spin, the peer
 * needs the core to post: they yield it for FAST_YIELD_US (CMESH_SPIN_US) instead, then sleep.
 * CMESH_SPIN_US=0: no waiting inside the call. Peers in this very process (tests): no waiting
 * either, the peer cannot run meanwhile.
 */
export function fastWaitPolicy(
  ranks: number,
  sameProcess: boolean,
  env: NodeJS.ProcessEnv = process.env,
  cores = os.availableParallelism(),
): { spinUs: number; sleepUs: number; yieldUs: number } {
  const raw = env.CMESH_SPIN_US;
  const explicit = raw !== undefined && raw !== '' && Number.isFinite(Number(raw)) ? Math.max(0, Number(raw)) : undefined;
  if (sameProcess || explicit === 0) return { spinUs: 0, sleepUs: 0, yieldUs: 0 };
  if (ranks > cores) return { spinUs: 0, sleepUs: FAST_SLEEP_US, yieldUs: explicit ?? FAST_YIELD_US };
  return { spinUs: explicit ?? FAST_SPIN_US, sleepUs: FAST_SLEEP_US, yieldUs: 0 };
}

/** Spinning catches a peer that is a few microseconds behind; past that a futex sleep frees the core. */
export const FAST_SPIN_US = 50;
/**
 * Ranks that share cores yield the core in a loop this long first (as Open MPI's ranks do when
 * oversubscribed): the peer that runs next posts, and no futex wake-up is paid.
 */
export const FAST_YIELD_US = 200;
/** The longest a small collective blocks the event loop waiting for a late peer. */
export const FAST_SLEEP_US = 1000;
