// Client for one sidecar over its Unix socket: framed request/response with per-request
// timeouts (sent to the sidecar, plus a client-side margin) and typed errors.
import * as net from 'net';
import { z } from 'zod';

import {
  COUNT_TO_END,
  encodeRequest,
  Frame,
  FrameDecodeError,
  FrameDecoder,
  FrameEncodeError,
  NO_PEER,
  REPLY_HEADER_BYTES,
  REQUEST_HEADER_BYTES,
  RequestFields,
  SidecarOp,
} from './frame-codec';
import { errorFromFrame, SidecarConnectionError, SidecarInvalidArgumentError, SidecarProtocolError, SidecarTimeoutError } from './errors';
import {
  asyncErrorSchema,
  AsyncErrorState,
  bufSchema,
  CollectiveRequest,
  CollectiveResult,
  collectiveResultSchema,
  CommInfo,
  commSchema,
  helloSchema,
  SIDECAR_PROTOCOL_VERSION,
  SidecarHello,
  uniqueIdSchema,
} from './protocol';

export interface SidecarClientOptions {
  /** How long to wait for the socket to accept (ms). */
  connectTimeoutMs?: number;
  /** Timeout for requests that do not give one (ms); 30 min like torch. */
  defaultTimeoutMs?: number;
  /** Extra client-side wait beyond a request's timeout, for the sidecar to report it (ms). */
  marginMs?: number;
}

export interface RequestOptions {
  timeoutMs?: number;
  payload?: Uint8Array;
}

export interface Reply {
  /** The result fields (README "Ops"). */
  result: Record<string, unknown>;
  payload: Buffer;
}

interface Pending {
  id: number;
  op: string;
  resolve: (r: Reply) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

/** The sidecar's default frame limit (1 GiB + 1 MiB), used until hello says otherwise. */
const DEFAULT_MAX_FRAME_BYTES = 2 ** 30 + 2 ** 20;
/** Room left in a copyOut reply for its result body. */
const COPY_OUT_BODY_ALLOWANCE = 64;

export class SidecarClient {
  private readonly decoder = new FrameDecoder();
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closedError: Error | null = null;
  /** The sidecar's frame limit (hello's limits.maxFrameBytes); its default until hello. */
  private maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;

  private constructor(
    private readonly socket: net.Socket,
    readonly socketPath: string,
    private readonly defaultTimeoutMs: number,
    private readonly marginMs: number,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (e) => this.failAll(new SidecarConnectionError(`sidecar socket ${socketPath}: ${e.message}`)));
    socket.on('close', () => this.failAll(new SidecarConnectionError(`sidecar socket ${socketPath} closed`)));
  }

  /** Connects to a listening sidecar. Throws SidecarConnectionError / SidecarTimeoutError. */
  static connect(socketPath: string, opts: SidecarClientOptions = {}): Promise<SidecarClient> {
    const connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path: socketPath });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new SidecarTimeoutError(`connecting to sidecar socket ${socketPath} timed out after ${connectTimeoutMs} ms`));
      }, connectTimeoutMs);
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(new SidecarConnectionError(`cannot connect to sidecar socket ${socketPath}: ${e.message}`));
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new SidecarClient(socket, socketPath, opts.defaultTimeoutMs ?? 30 * 60_000, opts.marginMs ?? 5000));
      });
    });
  }

  get closed(): boolean {
    return this.closedError !== null;
  }

  /** Why the connection closed, once it has. */
  get closeReason(): string | null {
    return this.closedError?.message ?? null;
  }

  /**
   * Sends one request and waits for its reply; rejects with the typed error of an error frame, or
   * with SidecarInvalidArgumentError for a field that does not fit the header (nothing is sent).
   * `op` may be a raw op code (for tests of the sidecar's checks).
   */
  request(op: SidecarOp | number, fields: RequestFields = {}, opts: RequestOptions = {}): Promise<Reply> {
    if (this.closedError) return Promise.reject(this.closedError);
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const id = this.nextId++;
    const opName = String(op);
    let frame: Buffer;
    try {
      frame = encodeRequest({ ...fields, id, op, timeoutMs }, opts.payload);
    } catch (e) {
      if (!(e instanceof FrameEncodeError)) throw e;
      return Promise.reject(new SidecarInvalidArgumentError(`sidecar ${opName}: ${e.message}`, opName));
    }
    return new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new SidecarTimeoutError(`sidecar ${opName} (request ${id}) got no reply within ${timeoutMs} ms (+${this.marginMs} ms margin)`, opName));
      }, timeoutMs + this.marginMs);
      this.pending.set(id, { id, op: opName, resolve, reject, timer });
      this.socket.write(frame);
    });
  }

  async hello(timeoutMs = 10_000): Promise<SidecarHello> {
    const r = await this.request('hello', {}, { timeoutMs });
    const hello = this.parse(helloSchema, r, 'hello');
    if (hello.protocol !== SIDECAR_PROTOCOL_VERSION) {
      throw new SidecarProtocolError(`sidecar speaks protocol ${hello.protocol}, this client ${SIDECAR_PROTOCOL_VERSION}`, 'PROTOCOL_VERSION', 'hello');
    }
    this.maxFrameBytes = hello.limits.maxFrameBytes;
    return hello;
  }

  async ping(delayMs = 0, timeoutMs?: number): Promise<void> {
    await this.request('ping', { delayMs }, { timeoutMs });
  }

  async getUniqueId(timeoutMs?: number): Promise<string> {
    return this.parse(uniqueIdSchema, await this.request('getUniqueId', {}, { timeoutMs }), 'getUniqueId').uniqueId;
  }

  async commInitRank(args: { nranks: number; rank: number; uniqueId: string; device: number }, timeoutMs?: number): Promise<CommInfo> {
    // The ncclUniqueId travels as the payload, raw.
    if (!/^[0-9a-fA-F]{256}$/.test(args.uniqueId)) {
      throw new SidecarInvalidArgumentError("sidecar commInitRank: field 'uniqueId' must be 256 hex digits (from getUniqueId)", 'commInitRank');
    }
    const { nranks, rank, device } = args;
    const r = await this.request('commInitRank', { nranks, rank, device }, { payload: Buffer.from(args.uniqueId, 'hex'), timeoutMs });
    return this.parse(commSchema, r, 'commInitRank');
  }

  async alloc(device: number, bytes: number, timeoutMs?: number): Promise<number> {
    return this.parse(bufSchema, await this.request('alloc', { device, count: bytes, dtype: 'uint8' }, { timeoutMs }), 'alloc').buf;
  }

  async free(buf: number, timeoutMs?: number): Promise<void> {
    await this.request('free', { buf }, { timeoutMs });
  }

  async memset(buf: number, args: { offset?: number; bytes?: number; value?: number } = {}, timeoutMs?: number): Promise<void> {
    const count = args.bytes ?? COUNT_TO_END;
    await this.request('memset', { buf, offset: args.offset, count, value: args.value, dtype: 'uint8' }, { timeoutMs });
  }

  /**
   * Writes `data` at `offset`, in requests of at most the sidecar's frame limit (a larger frame
   * would be refused; above 4 GiB its length would not even fit the header). `timeoutMs` bounds
   * each request.
   */
  async copyIn(buf: number, data: Uint8Array, offset = 0, timeoutMs?: number): Promise<void> {
    const chunk = this.maxFrameBytes - REQUEST_HEADER_BYTES;
    let done = 0;
    do {
      const piece = data.subarray(done, Math.min(data.byteLength, done + chunk));
      await this.request('copyIn', { buf, offset: offset + done, count: piece.byteLength, dtype: 'uint8' }, { payload: piece, timeoutMs });
      done += piece.byteLength;
    } while (done < data.byteLength);
  }

  /** Reads `bytes` at `offset`, in replies of at most the sidecar's frame limit. */
  async copyOut(buf: number, bytes: number, offset = 0, timeoutMs?: number): Promise<Buffer> {
    // The reply carries a 32-byte header and a small body ({}) before the bytes.
    const chunk = this.maxFrameBytes - REPLY_HEADER_BYTES - COPY_OUT_BODY_ALLOWANCE;
    if (bytes <= chunk) return this.copyOutOne(buf, bytes, offset, timeoutMs);
    const out = Buffer.allocUnsafe(bytes);
    for (let done = 0; done < bytes; ) {
      const n = Math.min(chunk, bytes - done);
      (await this.copyOutOne(buf, n, offset + done, timeoutMs)).copy(out, done);
      done += n;
    }
    return out;
  }

  private async copyOutOne(buf: number, bytes: number, offset: number, timeoutMs?: number): Promise<Buffer> {
    const r = await this.request('copyOut', { buf, offset, count: bytes, dtype: 'uint8' }, { timeoutMs });
    if (r.payload.length !== bytes) {
      throw new SidecarProtocolError(`copyOut asked ${bytes} bytes, got ${r.payload.length}`, 'SHORT_REPLY', 'copyOut');
    }
    return r.payload;
  }

  async collective(req: CollectiveRequest, timeoutMs?: number): Promise<CollectiveResult> {
    const r = await this.request(
      'collective',
      {
        comm: req.comm,
        collective: req.collective,
        count: req.count,
        dtype: req.dtype ?? 'float32',
        redOp: req.redOp ?? 'sum',
        root: req.root ?? 0,
        sendPeer: req.sendPeer ?? NO_PEER,
        recvPeer: req.recvPeer ?? NO_PEER,
        sendBuf: req.sendBuf ?? 0,
        recvBuf: req.recvBuf ?? 0,
        offset: req.sendOffset ?? 0,
        recvOffset: req.recvOffset ?? 0,
        warmup: req.warmup ?? 0,
        iters: req.iters ?? 1,
      },
      { timeoutMs },
    );
    return this.parse(collectiveResultSchema, r, 'collective');
  }

  async asyncError(comm: number, timeoutMs?: number): Promise<AsyncErrorState> {
    return this.parse(asyncErrorSchema, await this.request('asyncError', { comm }, { timeoutMs }), 'asyncError');
  }

  async abort(comm: number, timeoutMs?: number): Promise<void> {
    await this.request('abort', { comm }, { timeoutMs });
  }

  async destroy(comm: number, timeoutMs?: number): Promise<void> {
    await this.request('destroy', { comm }, { timeoutMs });
  }

  /** Asks the sidecar process to exit (answered before it does). */
  async shutdown(timeoutMs = 5000): Promise<void> {
    await this.request('shutdown', {}, { timeoutMs });
  }

  /** Closes the connection; pending requests fail with SidecarConnectionError. */
  close(): void {
    this.failAll(new SidecarConnectionError(`sidecar client for ${this.socketPath} closed`));
    this.socket.destroy();
  }

  private parse<T>(schema: z.ZodType<T>, r: Reply, op: string): T {
    const parsed = schema.safeParse(r.result);
    if (!parsed.success) {
      throw new SidecarProtocolError(`malformed ${op} reply: ${parsed.error.message}`, 'BAD_REPLY', op);
    }
    return parsed.data;
  }

  private onData(chunk: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.decoder.push(chunk);
    } catch (e) {
      const err = new SidecarProtocolError(`undecodable reply from sidecar: ${(e as FrameDecodeError).message}`, 'BAD_REPLY');
      this.failAll(err);
      this.socket.destroy();
      return;
    }
    for (const f of frames) this.onFrame(f);
  }

  private onFrame(f: Frame): void {
    // An error frame without an id answers a frame the sidecar could not read: since replies come
    // in order, that is the oldest pending request.
    const pending = f.id !== null ? this.pending.get(f.id) : this.pending.values().next().value;
    if (!pending) return; // a reply to a request that already timed out here
    this.pending.delete(pending.id);
    clearTimeout(pending.timer);
    if (f.ok) {
      pending.resolve({ result: f.result, payload: f.payload });
      return;
    }
    pending.reject(errorFromFrame(f.error?.code ?? 'INTERNAL', f.error?.message ?? 'no message', pending.op));
  }

  private failAll(err: Error): void {
    if (!this.closedError) this.closedError = err;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
  }
}
