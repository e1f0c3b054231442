// The agent's end of a service member's local path (the member on this host): a Unix socket, 0600
// in the temp directory, that takes one connection, from the placed member once it proved the
// group's secret (and after this end proved it: the member connects to nobody else), and maps the
// member's shared segment; ops arrive as frames with their data already in the segment, results
// go back the same way. See ServiceGroupLocalToAgent in @cmesh/protocol.
import { chmodSync, unlinkSync } from 'fs';
import { Server, Socket, createServer } from 'net';
import { tmpdir } from 'os';
import { join } from 'path';
import {
  ServiceGroupLocalToAgentSchema,
  ServiceGroupOp,
  ServiceGroupResult,
  serviceGroupLocalProof,
  serviceGroupNonce,
  serviceGroupProofValid,
} from '@cmesh/protocol';
import { loadShmAddon } from '@cmesh/collectives/shm-addon';
import { readFrames, writeFrame } from '@cmesh/client';

/** Where the worker with this pid listens: its agent removes it when the worker is gone, however it ended. */
export function localSocketPath(pid: number): string {
  return join(tmpdir(), `cmesh-svc-${pid}.sock`);
}

/** Removes a socket file left behind (the worker was killed). */
export function removeLocalSocket(pid: number): void {
  try {
    unlinkSync(localSocketPath(pid));
  } catch {
    /* not there */
  }
}

/** Connections still proving themselves at once, at most; and how long one may take. */
const MAX_HANDSHAKES = 4;
const HANDSHAKE_MS = 5_000;

export class LocalServer {
  readonly path = localSocketPath(process.pid);
  private server: Server | null = null;
  private conn: Socket | null = null;
  private segment: Uint8Array | null = null;
  private handshakes = 0;

  /**
   * `localKey`: serviceGroupKeys(G).local; `maxBytes`: the largest segment mapped. `onOp`: an op whose
   * data is the segment's first op.bytes; `onGone`: the member's connection closed (its process
   * ended or dropped the local path).
   */
  constructor(
    private readonly member: string,
    private readonly localKey: Uint8Array,
    private readonly maxBytes: number,
    private readonly onOp: (op: ServiceGroupOp, data: Uint8Array) => void,
    private readonly onGone: () => void,
  ) {}

  async listen(): Promise<string> {
    loadShmAddon(); // no addon, no local path: the caller stays on NATS
    this.unlink();
    const server = createServer((s) => this.accept(s));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.path, resolve));
    chmodSync(this.path, 0o600);
    this.server = server;
    process.once('exit', () => this.unlink());
    return this.path;
  }

  private accept(sock: Socket): void {
    sock.on('error', () => undefined);
    if (this.conn || this.handshakes >= MAX_HANDSHAKES) return void sock.destroy();
    this.handshakes++;
    let stage: 'hello' | 'proof' | 'member' | 'refused' = 'hello';
    let memberNonce = '';
    let agentNonce = '';
    const settled = () => {
      if (stage === 'member') return;
      this.handshakes--;
      clearTimeout(timer);
    };
    // said once; the socket then closes (or the handshake's timer closes it)
    const refuse = (message: string) => {
      stage = 'refused';
      writeFrame(sock, { type: 'refused', message });
      sock.end();
    };
    const timer = setTimeout(() => sock.destroy(), HANDSHAKE_MS);
    sock.once('close', settled);
    readFrames(sock, (raw) => {
      if (stage === 'refused') return;
      const f = ServiceGroupLocalToAgentSchema.safeParse(raw);
      if (!f.success) return void sock.destroy();
      const frame = f.data;
      if (stage === 'hello') {
        if (frame.type !== 'hello' || frame.member !== this.member) return refuse('not the member placed here');
        memberNonce = frame.nonce;
        agentNonce = serviceGroupNonce();
        stage = 'proof';
        return writeFrame(sock, { type: 'challenge', nonce: agentNonce, proof: serviceGroupLocalProof(this.localKey, 'agent', memberNonce, agentNonce) });
      }
      if (stage === 'proof') {
        if (frame.type !== 'proof' || !serviceGroupProofValid(this.localKey, 'member', memberNonce, agentNonce, frame.proof))
          return refuse('the member did not prove the group secret');
        if (this.conn) return refuse('the member is connected already');
        if (!this.map(sock, frame)) return;
        settled();
        stage = 'member';
        this.conn = sock;
        sock.once('close', () => {
          this.conn = null;
          this.segment = null;
          this.onGone();
        });
        return;
      }
      if (frame.type === 'segment') this.map(sock, frame);
      else if (frame.type === 'op') {
        const { op } = frame;
        if (!this.segment || op.bytes > this.segment.byteLength) return void sock.destroy(new Error(`op #${op.seq}: ${op.bytes} bytes do not fit the segment`));
        this.onOp(op, this.segment.subarray(0, op.bytes));
      } else sock.destroy();
    });
  }

  /** Maps the member's segment and says ok (or refused). */
  private map(sock: Socket, f: { pid: number; fd: number; bytes: number }): boolean {
    if (f.bytes > this.maxBytes) {
      writeFrame(sock, { type: 'refused', message: `a segment of ${f.bytes} bytes is over the ${this.maxBytes} an op may have` });
      return false;
    }
    try {
      this.segment = new Uint8Array(loadShmAddon().openSegment(f.pid, f.fd, f.bytes));
      writeFrame(sock, { type: 'ok' });
      return true;
    } catch (e) {
      writeFrame(sock, { type: 'refused', message: `cannot map the member's segment: ${(e as Error).message}` });
      return false;
    }
  }

  /** Whether the member is connected (its ops come here). */
  get connected(): boolean {
    return this.conn !== null;
  }

  /** The op's result: `out` into the segment (unless it is there already), then the frame. */
  reply(result: ServiceGroupResult, out: Uint8Array): void {
    const seg = this.segment;
    if (!seg || !this.conn) return;
    if (out.byteLength > seg.byteLength) return void this.conn.destroy(new Error(`result of ${out.byteLength} bytes does not fit the segment`));
    if (!(out.buffer === seg.buffer && out.byteOffset === seg.byteOffset)) seg.set(out);
    writeFrame(this.conn, { type: 'result', result });
  }

  close(): void {
    this.conn?.destroy();
    this.server?.close();
    this.unlink();
  }

  private unlink(): void {
    removeLocalSocket(process.pid);
  }
}
