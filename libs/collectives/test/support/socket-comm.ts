// Test-only Comm: N in-process ranks joined pairwise by real loopback TCP sockets. Messages are
// framed by a 4-byte little-endian length and matched FIFO per pair; every rank counts payload
// bytes sent and received per peer, so algorithms' traffic formulas can be checked. Used only to
// unit-test algorithms quickly; the library's transport is a separate implementation.
import * as net from 'net';
import type { Comm } from '../../src/transport/comm';

interface PendingRecv {
  into: Uint8Array;
  resolve: () => void;
  reject: (e: Error) => void;
}

/** One end of a pair: parses frames from the socket and hands them to recvs in order. */
class Channel {
  private readonly pending: PendingRecv[] = [];
  private readonly ready: Uint8Array[] = []; // complete messages nobody has asked for yet
  private readonly header = new Uint8Array(4);
  private headerFilled = 0;
  private target: { buf: Uint8Array; filled: number; recv: PendingRecv | null } | null = null;
  private failure: Error | null = null;

  constructor(
    readonly socket: net.Socket,
    private readonly onReceived: (bytes: number) => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => this.fail(new Error('socket closed')));
  }

  recv(into: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const msg = this.ready.shift();
    if (msg) {
      if (msg.byteLength !== into.byteLength) {
        return Promise.reject(new Error(`message of ${msg.byteLength} bytes, recv expected ${into.byteLength}`));
      }
      into.set(msg);
      this.onReceived(msg.byteLength);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.pending.push({ into, resolve, reject }));
  }

  private onData(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.target === null) {
        const take = Math.min(4 - this.headerFilled, chunk.length - off);
        this.header.set(chunk.subarray(off, off + take), this.headerFilled);
        this.headerFilled += take;
        off += take;
        if (this.headerFilled < 4) return;
        this.headerFilled = 0;
        const len = this.header[0] | (this.header[1] << 8) | (this.header[2] << 16) | (this.header[3] * 2 ** 24);
        // Land the payload straight in the waiting recv's buffer when one is posted.
        const recv = this.ready.length === 0 ? this.pending.shift() ?? null : null;
        if (recv && recv.into.byteLength !== len) {
          recv.reject(new Error(`message of ${len} bytes, recv expected ${recv.into.byteLength}`));
          this.target = { buf: new Uint8Array(len), filled: 0, recv: null };
        } else {
          this.target = { buf: recv ? recv.into : new Uint8Array(len), filled: 0, recv };
        }
      } else {
        const t = this.target;
        const take = Math.min(t.buf.byteLength - t.filled, chunk.length - off);
        t.buf.set(chunk.subarray(off, off + take), t.filled);
        t.filled += take;
        off += take;
      }
      if (this.target && this.target.filled === this.target.buf.byteLength) this.complete();
    }
  }

  private complete(): void {
    const t = this.target!;
    this.target = null;
    if (t.recv) {
      this.onReceived(t.buf.byteLength);
      t.recv.resolve();
      return;
    }
    const waiting = this.pending.shift();
    if (!waiting) {
      this.ready.push(t.buf);
    } else if (waiting.into.byteLength !== t.buf.byteLength) {
      waiting.reject(new Error(`message of ${t.buf.byteLength} bytes, recv expected ${waiting.into.byteLength}`));
    } else {
      waiting.into.set(t.buf);
      this.onReceived(t.buf.byteLength);
      waiting.resolve();
    }
  }

  private fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    for (const p of this.pending.splice(0)) p.reject(e);
  }
}

export class SocketComm implements Comm {
  bytesSent = 0;
  bytesReceived = 0;
  messagesSent = 0;
  readonly sentTo: number[];
  readonly receivedFrom: number[];
  /** channels[peer] (undefined for self) */
  readonly channels: (Channel | undefined)[];

  constructor(
    readonly rank: number,
    readonly size: number,
  ) {
    this.sentTo = new Array(size).fill(0);
    this.receivedFrom = new Array(size).fill(0);
    this.channels = new Array(size);
  }

  attach(peer: number, socket: net.Socket): void {
    this.channels[peer] = new Channel(socket, (bytes) => {
      this.bytesReceived += bytes;
      this.receivedFrom[peer] += bytes;
    });
  }

  send(peer: number, data: Uint8Array): Promise<void> {
    const ch = this.peer(peer);
    const header = Buffer.alloc(4);
    header.writeUInt32LE(data.byteLength, 0);
    this.bytesSent += data.byteLength;
    this.sentTo[peer] += data.byteLength;
    this.messagesSent++;
    return new Promise((resolve, reject) => {
      ch.socket.cork();
      ch.socket.write(header);
      // The callback fires once the kernel has the bytes: only then may the caller reuse `data`.
      ch.socket.write(data, (err) => (err ? reject(err) : resolve()));
      ch.socket.uncork();
    });
  }

  recv(peer: number, into: Uint8Array): Promise<void> {
    return this.peer(peer).recv(into);
  }

  resetCounters(): void {
    this.bytesSent = this.bytesReceived = this.messagesSent = 0;
    this.sentTo.fill(0);
    this.receivedFrom.fill(0);
  }

  private peer(peer: number): Channel {
    const ch = Number.isInteger(peer) && peer !== this.rank ? this.channels[peer] : undefined;
    if (!ch) throw new Error(`rank ${this.rank}: no connection to peer ${peer} (size ${this.size})`);
    return ch;
  }
}

export interface SocketMesh {
  comms: SocketComm[];
  close(): Promise<void>;
}

/** Connects `size` ranks pairwise over 127.0.0.1 (one listener on port 0 per pair). */
export async function createSocketMesh(size: number): Promise<SocketMesh> {
  const comms = Array.from({ length: size }, (_, r) => new SocketComm(r, size));
  const sockets: net.Socket[] = [];
  const pairs: Promise<void>[] = [];
  for (let i = 0; i < size; i++) {
    for (let j = i + 1; j < size; j++) {
      pairs.push(
        new Promise<void>((resolve, reject) => {
          const server = net.createServer();
          server.once('error', reject);
          server.once('connection', (accepted) => {
            sockets.push(accepted);
            comms[i].attach(j, accepted);
            server.close();
            if (client.readyState === 'open') resolve();
            else client.once('connect', () => resolve());
          });
          let client!: net.Socket;
          server.listen(0, '127.0.0.1', () => {
            const { port } = server.address() as net.AddressInfo;
            client = net.connect(port, '127.0.0.1');
            client.once('error', reject);
            sockets.push(client);
            comms[j].attach(i, client);
          });
        }),
      );
    }
  }
  await Promise.all(pairs);
  return {
    comms,
    close: async () => {
      await Promise.all(
        sockets.map(
          (s) =>
            new Promise<void>((resolve) => {
              if (s.destroyed) return resolve();
              s.once('close', () => resolve());
              s.destroy();
            }),
        ),
      );
    },
  };
}
