// Forming the data plane's full mesh of connections: listening, the exchange of addresses and
// host identities through the store, dialing every lower rank and admitting every higher one,
// and, with a secret, the HMAC challenge on each connection before anything else on it is parsed
// (auth/handshake.ts). What flows over the connections once they are up is mesh.ts's.
import * as net from 'net';
import * as os from 'os';
import { AuthenticationError, DistTimeoutError, PeerFailureError } from '../errors';
import { AUTH_MAGIC, AUTH_TIMEOUT_MS, AuthDialer, AuthListener, logRefusal, refusal, RefuseReason, refuseText } from '../auth/handshake';
import type { Store } from '../store/store';
import { PeerConnection } from './peer-connection';
import { timerMs } from '../timer';
import { debug, debugOn } from '../debug';
import { dataPortRange, listenInRange } from './listen';

export interface MeshSetupOptions {
  rank: number;
  size: number;
  store: Store;
  timeoutMs: number;
  masterAddr?: string;
  /** this rank's host identity (select.ts) */
  hostId: string;
  /** the busy-poll budget, for the debug log */
  busyPollUs: number;
  /** where CMESH_DATA_ADDR and CMESH_DATA_PORTS are read (default process.env) */
  env?: NodeJS.ProcessEnv;
}

/** What the mesh lends its connections: its routing, and its watch for their close. */
export interface MeshSetupHooks {
  /** a connection to `peer` (-1: accepted, rank not said yet; `onHello` admits it once it says) */
  connectionFor(peer: number, onHello?: (conn: PeerConnection) => boolean): PeerConnection;
  watch(conn: PeerConnection): void;
}

/**
 * Connects this rank to every other one, filling `peers`, and returns every rank's host identity.
 * The listener is closed once the mesh is complete (no one else may connect) or has failed; the
 * caller closes the connections of a mesh that failed to form.
 */
export async function formMesh(
  opts: MeshSetupOptions,
  key: Buffer | undefined,
  peers: (PeerConnection | undefined)[],
  hooks: MeshSetupHooks,
): Promise<string[]> {
  const host = dataPlaneHost(opts.masterAddr, opts.env);
  const hostId = opts.hostId;
  const accepted = new Set<number>();
  /** accepted connections that have not said which rank they are */
  const anonymous = new Set<PeerConnection>();
  let notifyAccept: () => void = () => {};
  // only a higher rank of this world that is not connected yet may dial us
  const admit = (c: PeerConnection, remote: string): boolean => {
    if (!key && c.peer === AUTH_MAGIC.readUInt32LE(0)) {
      logRefusal('data plane', remote, RefuseReason.ListenerHasNoSecret);
      c.socket.end(refusal(RefuseReason.ListenerHasNoSecret));
      return false;
    }
    // the dialer said which rank it is: one of the higher ranks, once
    if (c.peer <= opts.rank || c.peer >= opts.size || accepted.has(c.peer)) {
      if (debugOn) debug('mesh', `refused a connection from ${remote} that says it is rank ${c.peer}`);
      c.violate(`said it is rank ${c.peer}, which is not a rank in (${opts.rank}, ${opts.size}) that has not connected yet`);
      return false;
    }
    peers[c.peer] = c;
    accepted.add(c.peer);
    if (debugOn) debug('mesh', `connection from rank ${c.peer} accepted${key ? ' (authenticated)' : ''}`);
    notifyAccept();
    return true;
  };
  // paused, so that no byte is read before the socket is re-wrapped with our own read buffers
  const server = net.createServer({ pauseOnConnect: true }, (raw) => {
    const remote = `${raw.remoteAddress}:${raw.remotePort}`;
    const hello = (c: PeerConnection) => {
      anonymous.delete(c);
      return admit(c, remote);
    };
    const conn = hooks.connectionFor(-1, hello);
    conn.attach(adoptAccepted(raw, conn));
    anonymous.add(conn);
    conn.socket.once('close', () => anonymous.delete(conn));
    if (key) guardAccepted(conn, key, hello);
    hooks.watch(conn);
  });
  /** Dials every lower rank and waits for every higher one to dial in. */
  async function connectAll(): Promise<void> {
    const lower = [...Array(opts.rank).keys()];
    const deadline = Date.now() + opts.timeoutMs;
    await Promise.all(
      lower.map(async (peer) => {
        const [h, p] = (await opts.store.get(`mesh/addr/${peer}`, opts.timeoutMs)).toString().split(':');
        const conn = hooks.connectionFor(peer);
        conn.attach(await dial(h, Number(p), opts.rank, deadline, conn, key));
        peers[peer] = conn;
        if (debugOn) debug('mesh', `connected to rank ${peer} at ${h}:${p}`);
        hooks.watch(conn);
      }),
    );
    const expected = opts.size - 1 - opts.rank;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          const missing = [...Array(opts.size).keys()].filter((r) => r > opts.rank && !accepted.has(r));
          if (debugOn) debug('mesh', `error: ranks [${missing.join(', ')}] did not connect within ${opts.timeoutMs} ms`);
          reject(
            new DistTimeoutError(`data plane: ranks [${missing.join(', ')}] did not connect within ${opts.timeoutMs} ms`, { rank: opts.rank, peers: missing }),
          );
        },
        timerMs(deadline - Date.now()),
      );
      const onAccept = () => {
        if (accepted.size === expected) {
          clearTimeout(timer);
          resolve();
        }
      };
      notifyAccept = onAccept;
      onAccept();
    });
    // no one else may connect once the mesh is complete
    server.close();
    if (debugOn) debug('mesh', `connected to all ${opts.size - 1} peers`);
  }

  const port = await listenInRange(server, host, dataPortRange((opts.env ?? process.env).CMESH_DATA_PORTS));
  if (debugOn) debug('mesh', `data plane listening on ${host}:${port}, world ${opts.size}, busy-poll ${opts.busyPollUs} us`);
  // which ranks share a host (for shared memory, and for algorithms that treat hosts apart); read
  // before dialing, so that every store read is over once the mesh is complete
  await opts.store.set(`mesh/host/${opts.rank}`, hostId);
  await opts.store.set(`mesh/addr/${opts.rank}`, `${host}:${port}`);
  try {
    const hostIds = await readHostIds(opts.store, opts.rank, opts.size, hostId, opts.timeoutMs);
    await connectAll();
    // nor stay connected without a rank
    for (const c of anonymous) c.violate('did not say which rank it is before the mesh was complete');
    return hostIds;
  } catch (e) {
    server.close();
    throw e;
  }
}

/**
 * Every rank's host id. A rank that never published one (slow to start, or dead before the
 * mesh) is named, so that the job blames it and not the rank left waiting for it.
 */
async function readHostIds(store: Store, rank: number, size: number, own: string, timeoutMs: number): Promise<string[]> {
  const reads = await Promise.allSettled(
    [...Array(size).keys()].map(async (r) => (r === rank ? own : (await store.get(`mesh/host/${r}`, timeoutMs)).toString())),
  );
  const late = reads.flatMap((x, r) => (x.status === 'rejected' && x.reason instanceof DistTimeoutError ? [r] : []));
  if (late.length) {
    throw new DistTimeoutError(`data plane: ranks [${late.join(', ')}] did not publish their address within ${timeoutMs} ms`, { rank, peers: late });
  }
  const failed = reads.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
  return reads.map((x) => (x as PromiseFulfilledResult<string>).value);
}

/** Address other ranks can reach: loopback for a loopback master, else this host's first IPv4. */
function dataPlaneHost(masterAddr: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.CMESH_DATA_ADDR;
  if (explicit) return explicit;
  if (!masterAddr || masterAddr === 'localhost' || masterAddr.startsWith('127.')) return '127.0.0.1';
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** The listener's half of the challenge on an accepted connection; refused ones are closed. */
function guardAccepted(conn: PeerConnection, key: Buffer, admit: (c: PeerConnection) => boolean): void {
  const remote = `${conn.socket.remoteAddress}:${conn.socket.remotePort}`;
  const auth = new AuthListener(key, 'data-plane', 4);
  const refuse = (reason: RefuseReason, reply?: Buffer) => {
    conn.gate = () => undefined;
    logRefusal('data plane', remote, reason);
    if (reply) conn.socket.end(reply);
    setTimeout(() => conn.socket.destroy(), reply ? 1000 : 0).unref();
  };
  const timer = setTimeout(() => refuse(RefuseReason.Protocol), AUTH_TIMEOUT_MS).unref();
  conn.socket.on('close', () => clearTimeout(timer));
  conn.gate = (chunk) => {
    const step = auth.push(chunk);
    if (step.state === 'more') {
      if (step.send) conn.socket.write(step.send);
      return undefined;
    }
    clearTimeout(timer);
    if (step.state === 'failed') {
      refuse(step.reason, step.send);
      return undefined;
    }
    conn.gate = undefined;
    conn.peer = step.value.readUInt32LE(0);
    if (!admit(conn)) {
      conn.gate = () => undefined;
      return undefined;
    }
    conn.socket.write(step.send!);
    return step.rest;
  };
}

async function dial(host: string, port: number, rank: number, deadline: number, conn: PeerConnection, key: Buffer | undefined): Promise<net.Socket> {
  let last: Error | undefined;
  while (Date.now() < deadline) {
    let s: net.Socket;
    try {
      s = await new Promise<net.Socket>((resolve, reject) => {
        const sock = net.connect({ host, port, onread: conn.onread }, () => resolve(sock));
        sock.once('error', reject);
      });
    } catch (err) {
      last = err as Error;
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    s.removeAllListeners('error');
    // a peer dying now resets the connection: 'close' follows, and the handshake and watch() act
    // on it; an 'error' with no listener would kill this process instead
    s.on('error', () => {});
    const hello = Buffer.allocUnsafe(4);
    hello.writeUInt32LE(rank, 0);
    if (!key) {
      s.write(hello);
      return s;
    }
    await authenticateDialed(s, conn, key, hello, `${host}:${port}`, rank, deadline); // a refusal is final
    return s;
  }
  throw new DistTimeoutError(`data plane: could not connect to ${host}:${port} (${last?.message ?? 'timeout'})`, { rank });
}

/** The dialer's half of the challenge, through the connection's read path (conn.gate). */
function authenticateDialed(s: net.Socket, conn: PeerConnection, key: Buffer, rankBytes: Buffer, where: string, rank: number, deadline: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const dialer = new AuthDialer(key, 'data-plane', rankBytes);
    const ctx = { rank, peers: [conn.peer] };
    const finish = (err?: Error) => {
      clearTimeout(timer);
      s.off('close', onClose);
      if (!err) return resolve();
      conn.gate = () => undefined;
      s.destroy();
      reject(err);
    };
    // no refusal came first: the peer died (or gave up on us), it did not reject us
    const onClose = () => finish(new PeerFailureError(`rank ${conn.peer} at ${where} died or closed its connection during authentication`, ctx));
    const timer = setTimeout(
      () => finish(new DistTimeoutError(`data plane: rank ${conn.peer} at ${where} did not complete authentication in time`, ctx)),
      timerMs(deadline - Date.now()),
    );
    conn.gate = (chunk) => {
      const step = dialer.push(chunk);
      if (step.send) s.write(step.send);
      if (step.state === 'more') return undefined;
      if (step.state === 'failed') {
        const why =
          step.by === 'us'
            ? 'it could not prove the shared secret (secrets differ)'
            : step.reason === RefuseReason.ListenerHasNoSecret
              ? 'this rank has a secret and that one has none (every rank needs the same CMESH_SECRET)'
              : `it refused this rank: ${refuseText(step.reason)} (every rank needs the same CMESH_SECRET)`;
        finish(new AuthenticationError(`data plane: rank ${conn.peer} at ${where}: ${why}`, ctx));
        return undefined;
      }
      conn.gate = undefined;
      finish();
      return step.rest;
    };
    s.on('close', onClose);
    s.write(dialer.hello());
  });
}

/**
 * net.Server has no `onread` option, so an accepted socket (created paused) is re-wrapped around
 * its libuv handle with the connection's read buffers, as net.Server builds its own sockets.
 * Without a handle to adopt, the connection is fed from 'data' events instead.
 */
function adoptAccepted(raw: net.Socket, conn: PeerConnection): net.Socket {
  const handle = (raw as unknown as { _handle?: object })._handle;
  if (!handle) {
    raw.on('data', (chunk: Buffer) => conn.feed(chunk));
    raw.resume();
    return raw;
  }
  return new net.Socket({ handle, onread: conn.onread, readable: true, writable: true } as net.SocketConstructorOpts);
}
