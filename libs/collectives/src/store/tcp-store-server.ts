// The TcpStore server (c10d's TCPStore daemon): an in-memory map plus parked get/wait requests
// that are answered as soon as their keys appear.
import * as net from 'net';
import { InvalidArgumentError } from '../errors';
import { Cmd, encodeFrame, flag, Frame, FrameDecoder, i64, readI64, REPLY_ERROR, REPLY_OK } from './frame-codec';

interface Waiter {
  socket: net.Socket;
  keys: string[];
  reply: () => void;
}

export class TcpStoreServer {
  private readonly data = new Map<string, Buffer>();
  private waiters: Waiter[] = [];
  private readonly sockets = new Set<net.Socket>();
  private server?: net.Server;
  port = 0;

  async listen(host: string, port: number): Promise<number> {
    const server = net.createServer((s) => this.accept(s));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as net.AddressInfo).port;
    return this.port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(socket: net.Socket): void {
    socket.setNoDelay(true);
    this.sockets.add(socket);
    const decoder = new FrameDecoder();
    socket.on('data', (chunk) => {
      try {
        for (const f of decoder.push(chunk)) this.handle(socket, f);
      } catch (err) {
        socket.destroy(err as Error); // a client speaking another protocol
      }
    });
    const drop = () => {
      this.sockets.delete(socket);
      this.waiters = this.waiters.filter((w) => w.socket !== socket);
    };
    socket.on('close', drop);
    socket.on('error', drop);
  }

  private reply(socket: net.Socket, id: number, fields: Uint8Array[] = []): void {
    if (!socket.destroyed) socket.write(encodeFrame(REPLY_OK, id, fields));
  }

  private fail(socket: net.Socket, id: number, message: string): void {
    if (!socket.destroyed) socket.write(encodeFrame(REPLY_ERROR, id, [Buffer.from(message, 'utf8')]));
  }

  private handle(socket: net.Socket, { tag, id, fields }: Frame): void {
    const key = () => {
      if (!fields[0]) throw new Error('missing key');
      return fields[0].toString('utf8');
    };
    switch (tag) {
      case Cmd.SET:
        this.data.set(key(), fields[1] ?? Buffer.alloc(0));
        this.reply(socket, id);
        this.wake();
        return;
      case Cmd.GET: {
        const k = key();
        this.park({ socket, keys: [k], reply: () => this.reply(socket, id, [this.data.get(k)!]) });
        return;
      }
      case Cmd.WAIT:
        this.park({ socket, keys: fields.map((f) => f.toString('utf8')), reply: () => this.reply(socket, id) });
        return;
      case Cmd.ADD: {
        const k = key();
        const cur = this.data.has(k) ? Number(this.data.get(k)!.toString('utf8')) : 0;
        if (!Number.isSafeInteger(cur)) return this.fail(socket, id, `key ${k} does not hold an integer`);
        const next = cur + readI64(fields[1]);
        this.data.set(k, Buffer.from(String(next)));
        this.reply(socket, id, [i64(next)]);
        this.wake();
        return;
      }
      case Cmd.COMPARE_SET: {
        const k = key();
        const [, expected, desired] = fields;
        const cur = this.data.get(k);
        if ((cur === undefined && expected.length === 0) || (cur !== undefined && cur.equals(expected))) {
          this.data.set(k, desired);
          this.reply(socket, id, [desired]);
          this.wake();
        } else {
          this.reply(socket, id, [cur ?? expected]);
        }
        return;
      }
      case Cmd.CHECK:
        this.reply(socket, id, [flag(fields.every((f) => this.data.has(f.toString('utf8'))))]);
        return;
      case Cmd.DELETE:
        this.reply(socket, id, [flag(this.data.delete(key()))]);
        return;
      case Cmd.NUM_KEYS:
        this.reply(socket, id, [i64(this.data.size)]);
        return;
      default:
        this.fail(socket, id, `unknown store command ${tag}`);
    }
  }

  private park(w: Waiter): void {
    if (w.keys.every((k) => this.data.has(k))) w.reply();
    else this.waiters.push(w);
  }

  private wake(): void {
    if (!this.waiters.length) return;
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.keys.every((k) => this.data.has(k))) w.reply();
      else still.push(w);
    }
    this.waiters = still;
  }
}

/**
 * A standalone store server (torch's TCPStore daemon without a client), e.g. hosted by a launcher
 * for its workers: `const srv = await startTcpStoreServer({ port: 0 }); srv.port; await srv.close()`.
 */
export async function startTcpStoreServer(opts: { host?: string; port?: number } = {}): Promise<TcpStoreServer> {
  const port = opts.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError(`startTcpStoreServer: port must be an integer in [0, 65535], got ${JSON.stringify(port)}`);
  const server = new TcpStoreServer();
  await server.listen(opts.host ?? '127.0.0.1', port);
  return server;
}
