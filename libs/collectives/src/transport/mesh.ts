// The TCP peer mesh of one world: every rank listens on an ephemeral port, publishes its address in
// the store, and holds one connection to every other rank (rank i dials every j < i). Process
// groups share it and tell their traffic apart by group id in the frame header. mesh-setup.ts
// forms it (listening, the address exchange, dialing, authentication); this file routes what flows
// over it: sends and posted receives, any-source receives, aborts and goodbyes, a peer's loss.
import { AuthenticationError, CmeshError, CollectiveMismatchError, DistTimeoutError, PeerFailureError } from '../errors';
import { readRefusal, refuseText } from '../auth/handshake';
import { resolveSecret } from '../auth/secret';
import type { Store } from '../store/store';
import { FrameHeader, FrameKind, HEADER_BYTES, NO_SIGNATURE, OpSignature, matchKey, writeHeader } from './frame';
import { PeerConnection, PostedRecv } from './peer-connection';
import { UnexpectedLimits, unexpectedLimits } from './unexpected-limits';
import { Spinner } from './spinner';
import { timerMs } from '../timer';
import { debug, debugOn } from '../debug';
import { formMesh } from './mesh-setup';
import { ShmTransport } from './shm/shm-transport';
import type { FastGroup } from './shm/fast';
import { TransportMode, hostIdentity, transportMode } from './shm/select';

export interface AbortNotice {
  failedRank: number;
  message: string;
  reason: 'peer' | 'mismatch' | 'timeout' | 'error';
  /** the rank that sent it (kept with the notice here, not on the wire) */
  via?: number;
}

interface AnySourceRecv extends PostedRecv {
  key: string;
  /** the ranks that may send it (the group's other members) */
  candidates: number[];
}

const MAX_ABORTS = 4096;
/** Group id of the setup barrier's messages: no process group has it. */
const SETUP_GROUP = 0xffffffff;
/** How long close() waits for its goodbyes to be written. */
const BYE_WAIT_MS = 2000;

export class Mesh {
  private readonly peers: (PeerConnection | undefined)[];
  private readonly anySource = new Map<string, AnySourceRecv[]>();
  /** Op-scoped aborts received from peers, by match key. */
  private readonly aborts = new Map<string, AbortNotice>();
  private closing = false;
  private readonly headerPool: Buffer[] = [];
  private spinner: Spinner;
  /** The shared-memory rings to peers on this host, when any (see shm/). */
  private shm?: ShmTransport;
  /** Host identity of every rank (select.ts: ranks with the same one share a host). */
  private hostIds: string[] = [];
  /** The transport asked for (CMESH_TRANSPORT or the option): the same on every rank. */
  mode: TransportMode = 'auto';
  /** what one peer may make this rank buffer before it is asked for (CMESH_MAX_UNEXPECTED_*) */
  private unexpectedLimits: UnexpectedLimits;

  private constructor(
    readonly rank: number,
    readonly size: number,
    /** the settings this mesh reads (InitOptions.env) */
    private readonly env: NodeJS.ProcessEnv,
  ) {
    this.peers = new Array(size).fill(undefined);
    this.spinner = Spinner.fromEnv(env);
    this.unexpectedLimits = unexpectedLimits(env);
  }

  /**
   * Listens, exchanges addresses through the store and connects the full mesh (mesh-setup.ts).
   * `secret` (default: CMESH_SECRET): every connection first passes an HMAC challenge both ways
   * (auth/handshake.ts) and carries the dialer's rank under it; before that nothing is parsed.
   * Only connection set-up pays for it: frames carry no authentication.
   */
  static async create(opts: {
    rank: number;
    size: number;
    store: Store;
    timeoutMs: number;
    masterAddr?: string;
    transport?: TransportMode | string;
    secret?: string;
    /** this rank's host identity instead of hostIdentity() (tests place in-process ranks on "hosts" this way) */
    hostId?: string;
    /** bounds on messages a peer sends before they are asked for (default: CMESH_MAX_UNEXPECTED_*, else DEFAULT_UNEXPECTED_LIMITS) */
    unexpected?: UnexpectedLimits;
    /** where the CMESH_* settings are read (default process.env) */
    env?: NodeJS.ProcessEnv;
  }): Promise<Mesh> {
    const env = opts.env ?? process.env;
    const mode = transportMode(opts.transport, env);
    const key = resolveSecret(opts.secret, env);
    const mesh = new Mesh(opts.rank, opts.size, env);
    if (opts.unexpected) mesh.unexpectedLimits = opts.unexpected;
    const hostId = opts.hostId ?? hostIdentity();
    mesh.hostIds = [hostId];
    mesh.mode = mode;
    if (opts.size === 1) return mesh;
    try {
      mesh.hostIds = await formMesh({ ...opts, env, hostId, busyPollUs: mesh.spinner.budgetUs }, key, mesh.peers, {
        connectionFor: (peer, onHello) => mesh.connectionFor(peer, onHello),
        watch: (conn) => mesh.watch(conn),
      });
    } catch (e) {
      // nothing of a mesh that failed to form stays open: the connections it made
      mesh.closing = true;
      for (const c of mesh.peers) c?.socket?.destroy();
      throw e;
    }
    if (mode !== 'tcp') {
      await mesh.attachShm({ ...opts, mode, host: hostId });
      await mesh.setupBarrier(opts.timeoutMs);
    }
    return mesh;
  }

  /**
   * One empty message from every peer, over the transport each pair now uses: no rank returns
   * while another still reads setup keys from the store (rank 0 may exit at once, and with it
   * the store it serves).
   */
  private async setupBarrier(timeoutMs: number): Promise<void> {
    const peers = [...Array(this.size).keys()].filter((r) => r !== this.rank);
    const none = new Uint8Array(0);
    const heard = new Set<number>();
    const recvs = peers.map((p) => this.recv(p, FrameKind.P2P, SETUP_GROUP, 0, NO_SIGNATURE, none).done.then(() => void heard.add(p)));
    await Promise.all(peers.map((p) => this.send(p, FrameKind.P2P, SETUP_GROUP, 0, NO_SIGNATURE, none)));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const missing = peers.filter((p) => !heard.has(p));
        reject(
          new DistTimeoutError(`data plane: ranks [${missing.join(', ')}] did not finish setting up within ${timeoutMs} ms`, {
            rank: this.rank,
            peers: missing,
          }),
        );
      }, timerMs(timeoutMs));
    });
    try {
      await Promise.race([Promise.all(recvs), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Host of each of these world ranks, numbered 0, 1, ... in order of first appearance (the same
   * answer on every rank).
   */
  hostsOf(ranks: readonly number[]): number[] {
    const index = new Map<string, number>();
    return ranks.map((r) => {
      const id = this.hostIds[r] ?? `rank ${r}`;
      if (!index.has(id)) index.set(id, index.size);
      return index.get(id)!;
    });
  }

  /** Whether every pair of these ranks talks over shared memory (any rank of them gives the same answer). */
  allOnShm(ranks: readonly number[]): boolean {
    return ranks.length > 1 && !!this.shm && ranks.every((a) => ranks.every((b) => a === b || this.shm!.pairs.has(`${Math.min(a, b)},${Math.max(a, b)}`)));
  }

  /**
   * The shared-memory path for small collectives (shm/fast.ts) of a group of every rank of the
   * world, when all of them share this host's memory; the first such group gets it.
   */
  fastPath(worldRanks: readonly number[], aborted: (seq: number) => Error | undefined): FastGroup | undefined {
    return worldRanks.length === this.size ? this.shm?.fastGroup(worldRanks, { aborted }, this.env) : undefined;
  }

  /** Moves the frames to peers on this host onto shared memory; the sockets stay as liveness. */
  private async attachShm(opts: { rank: number; size: number; store: Store; timeoutMs: number; mode: 'shm' | 'auto'; host: string }): Promise<void> {
    try {
      this.shm = await ShmTransport.setup(opts);
    } catch (e) {
      await this.close();
      throw e;
    }
    if (!this.shm) return;
    for (const [peer, link] of this.shm.links) {
      const conn = this.peers[peer]!;
      conn.link = link;
      link.attach((chunk) => conn.feed(chunk));
    }
    this.shm.start();
    this.spinner = Spinner.forShm(this.env);
    this.spinner.poller = this.shm.poller(this.spinner.yields);
    if (debugOn && this.spinner.yields) debug('shm', `ranks share cores: busy-poll ${this.spinner.budgetUs} us, yielding the core each turn`);
  }

  private connectionFor(peer: number, onHello?: (conn: PeerConnection) => void): PeerConnection {
    return new PeerConnection(
      peer,
      {
        onControl: (p, h, payload) => this.onControl(p, h, payload),
        takeAnySource: (h) => this.takeAnySource(h),
        onUnexpectedP2P: (p) => this.matchAnySource(p),
      },
      onHello,
      this.unexpectedLimits,
    );
  }

  private watch(conn: PeerConnection): void {
    conn.socket.on('error', () => {}); // 'close' follows and says it all
    conn.socket.on('close', () => {
      if (conn.peer >= 0 && this.peers[conn.peer] === conn) this.onPeerClosed(conn);
    });
  }

  private onPeerClosed(conn: PeerConnection): void {
    // what the peer wrote to shared memory before it went (its Bye, say) comes first
    conn.link?.poll();
    conn.closed = true;
    if (debugOn) debug('mesh', `connection to rank ${conn.peer} lost${this.closing ? ' (closing)' : conn.leaving ? ' (peer left)' : ''}`);
    if (this.closing) return;
    const refused = conn.refused && readRefusal(Buffer.concat([conn.refused, Buffer.alloc(64)]));
    const err = refused
      ? new AuthenticationError(
          `data plane: rank ${conn.peer} refused this rank's connection: ${refuseText(refused)} (every rank needs the same CMESH_SECRET)`,
          { rank: this.rank, peers: [conn.peer] },
        )
      : conn.leaving
        ? new PeerFailureError(`rank ${conn.peer} has destroyed its process group`, { rank: this.rank, peers: [conn.peer] })
        : conn.protocolError
          ? new PeerFailureError(`rank ${conn.peer} broke the data-plane protocol (${conn.protocolError}); its connection was closed`, {
              rank: this.rank,
              peers: [conn.peer],
            })
          : new PeerFailureError(`rank ${conn.peer} died or closed its connection`, { rank: this.rank, peers: [conn.peer] });
    conn.rejectPosted(err);
    conn.link?.close(err);
    for (const [key, q] of [...this.anySource]) {
      // an any-source receive only fails when none of its possible senders is left
      const dead = q.filter((r) => r.candidates.every((p) => !this.peers[p] || this.peers[p]!.closed));
      if (!dead.length) continue;
      const alive = q.filter((r) => !dead.includes(r));
      if (alive.length) this.anySource.set(key, alive);
      else this.anySource.delete(key);
      for (const r of dead)
        r.reject(new PeerFailureError(`every possible sender has closed its connection (last: rank ${conn.peer})`, { rank: this.rank, peers: r.candidates }));
    }
  }

  /** An abort or bye from a peer; returns why the frame is malformed, if it is. */
  private onControl(peer: number, h: FrameHeader, payload: Buffer): string | undefined {
    if (h.kind === FrameKind.Bye) {
      this.peers[peer]!.leaving = true;
      return undefined;
    }
    const notice = parseAbortNotice(payload);
    if (!notice) return `an abort frame whose payload is not an abort notice (${payload.length} bytes)`;
    if (debugOn) debug('mesh', `error: rank ${peer} aborted op (group ${h.group}, tag ${h.tag}): ${notice.message}`);
    const key = matchKey(FrameKind.Collective, h.group, h.tag);
    if (this.aborts.size >= MAX_ABORTS) this.aborts.delete(this.aborts.keys().next().value!);
    this.aborts.set(key, { ...notice, via: peer });
    const err = abortError(notice, peer, this.rank);
    for (const p of this.peers) p?.rejectPosted(err, (k) => k === key);
    return undefined;
  }

  /** The abort a peer sent for this op, if any. */
  abortFor(kind: FrameKind, group: number, tag: number): AbortNotice | undefined {
    return kind === FrameKind.Collective ? this.aborts.get(matchKey(kind, group, tag)) : undefined;
  }

  private takeAnySource(h: FrameHeader): PostedRecv | undefined {
    const key = matchKey(h.kind, h.group, h.tag);
    const q = this.anySource.get(key);
    if (!q || !q.length) return undefined;
    const r = q.shift()!;
    if (!q.length) this.anySource.delete(key);
    return r;
  }

  private matchAnySource(peer: number): void {
    for (const [key, q] of [...this.anySource]) {
      while (q.length) {
        const u = this.peers[peer]!.takeUnexpected(key);
        if (!u) break;
        this.peers[peer]!.deliver(u, q.shift()!);
      }
      if (!q.length) this.anySource.delete(key);
    }
  }

  connection(peer: number): PeerConnection {
    const c = this.peers[peer];
    if (!c) throw new CmeshError(`data plane: no connection to rank ${peer}`, { rank: this.rank, peers: [peer] });
    return c;
  }

  private header(kind: FrameKind, group: number, tag: number, sig: OpSignature, length: number): Buffer {
    return writeHeader(this.headerPool.pop() ?? Buffer.allocUnsafe(HEADER_BYTES), kind, group, tag, sig, length);
  }

  send(peer: number, kind: FrameKind, group: number, tag: number, sig: OpSignature, data: Uint8Array): Promise<void> {
    const c = this.connection(peer);
    if (c.closed) {
      return Promise.reject(new PeerFailureError(`rank ${peer} died or closed its connection`, { rank: this.rank, peers: [peer] }));
    }
    const h = this.header(kind, group, tag, sig, data.byteLength);
    this.spinner.kick(data.byteLength);
    return c.send(h, data).then(
      () => void this.headerPool.push(h),
      (err: Error) => {
        throw new PeerFailureError(`send to rank ${peer} failed: ${err.message}`, { rank: this.rank, peers: [peer] });
      },
    );
  }

  /** Posts a receive from one peer; returns a cancel function for timeouts. */
  recv(peer: number, kind: FrameKind, group: number, tag: number, sig: OpSignature, into: Uint8Array): { done: Promise<number>; cancel: () => boolean } {
    const c = this.connection(peer);
    const key = matchKey(kind, group, tag);
    this.spinner.kick(into.byteLength);
    let recv!: PostedRecv;
    const done = new Promise<number>((resolve, reject) => {
      recv = { into, sig, resolve, reject };
    });
    const aborted = this.abortFor(kind, group, tag);
    if (aborted) recv.reject(abortError(aborted, undefined, this.rank));
    else if (c.closed && !c.unexpected.get(key)?.length) {
      recv.reject(new PeerFailureError(`rank ${peer} died or closed its connection`, { rank: this.rank, peers: [peer] }));
    } else {
      c.post(key, recv);
      // a message already in shared memory goes straight into `into`
      c.link?.poll();
    }
    return { done, cancel: () => c.cancel(key, recv) };
  }

  /** Receives a P2P message from whichever peer sends first on (group, tag). */
  recvAny(group: number, tag: number, into: Uint8Array, candidates: number[]): { done: Promise<number>; cancel: () => boolean } {
    const key = matchKey(FrameKind.P2P, group, tag);
    this.spinner.kick(into.byteLength);
    let recv!: AnySourceRecv;
    const done = new Promise<number>((resolve, reject) => {
      recv = { into, sig: NO_SIGNATURE, resolve, reject, key, candidates };
    });
    for (const peer of candidates) {
      const u = this.peers[peer]?.takeUnexpected(key);
      if (u) {
        this.peers[peer]!.deliver(u, recv);
        return { done, cancel: () => false };
      }
    }
    if (candidates.every((p) => this.peers[p]?.closed)) {
      recv.reject(new PeerFailureError(`every possible sender has closed its connection`, { rank: this.rank, peers: candidates }));
    } else {
      let q = this.anySource.get(key);
      if (!q) this.anySource.set(key, (q = []));
      q.push(recv);
    }
    return {
      done,
      cancel: () => {
        const q = this.anySource.get(key);
        const i = q ? q.indexOf(recv) : -1;
        if (i >= 0) q!.splice(i, 1);
        return i >= 0;
      },
    };
  }

  /** Tells the given peers that op (group, tag) failed here, so they fail it too instead of hanging. */
  broadcastAbort(group: number, tag: number, notice: AbortNotice, peers: number[]): void {
    const payload = Buffer.from(JSON.stringify(notice));
    for (const p of peers) {
      const c = this.peers[p];
      if (!c || c.closed || p === this.rank) continue;
      c.send(this.header(FrameKind.Abort, group, tag, NO_SIGNATURE, payload.length), payload).catch(() => {});
    }
  }

  bytesSent(peer: number): number {
    return this.peers[peer]?.bytesSent ?? 0;
  }

  /** Says goodbye to every peer and closes the connections. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const byes = this.peers.map((c) =>
      c && !c.closed ? c.send(this.header(FrameKind.Bye, 0, 0, NO_SIGNATURE, 0), new Uint8Array(0)).catch(() => {}) : Promise.resolve(),
    );
    // a Bye waits for room in a ring only so long: a stopped peer drains nothing
    await Promise.race([Promise.all(byes), new Promise((r) => setTimeout(r, BYE_WAIT_MS).unref())]);
    this.shm?.close(new PeerFailureError('the process group was destroyed', { rank: this.rank }));
    for (const c of this.peers) c?.socket.end();
  }
}

/** An abort frame's payload as a notice, or undefined when it is not one. */
function parseAbortNotice(payload: Buffer): AbortNotice | undefined {
  let v: unknown;
  try {
    v = JSON.parse(payload.toString('utf8'));
  } catch {
    return undefined;
  }
  const n = v as Partial<AbortNotice> | null;
  if (typeof n !== 'object' || n === null || !Number.isInteger(n.failedRank) || typeof n.message !== 'string') return undefined;
  if (n.reason !== undefined && typeof n.reason !== 'string') return undefined;
  return n as AbortNotice;
}

export function abortError(notice: AbortNotice, via: number | undefined, rank: number): CmeshError {
  const from = via ?? notice.via;
  const by = from === undefined ? '' : ` (reported by rank ${from})`;
  // a mismatch the other side saw first names this rank there; here it names the other side
  const mine = notice.reason === 'mismatch' && notice.failedRank === rank && from !== undefined;
  const ctx = { rank, peers: [mine ? from : notice.failedRank] };
  const message = `${notice.message}${by}`;
  switch (notice.reason) {
    case 'timeout':
      return new DistTimeoutError(message, ctx);
    case 'mismatch':
      return new CollectiveMismatchError(message, ctx);
    case 'peer':
      return new PeerFailureError(message, ctx);
    default:
      return new CmeshError(message, ctx);
  }
}
