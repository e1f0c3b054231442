// The member's end of the local path (a member on its agent's host): a Unix socket to its agent's
// worker for the op and result frames, and a shared memory segment of this process's (a memfd
// the worker maps) that holds an op's data and then its result, so the bytes cross neither NATS
// nor the socket. Opened only on the socket its own agent's authenticated heartbeat names, and
// only after the other end proved it holds the group's secret (and this end proved it too);
// anything that fails while opening leaves the member on NATS.
import { Socket, connect } from 'net';
import {
  ServiceGroupLocalToMember,
  ServiceGroupLocalToMemberSchema,
  ServiceGroupOp,
  ServiceGroupResult,
  serviceGroupLocalProof,
  serviceGroupNonce,
  serviceGroupProofValid,
} from '@cmesh/protocol';
import { ShmAddon, loadShmAddon } from '@cmesh/collectives/shm-addon';
import { readFrames, writeFrame } from './local-frames';

/** The first segment's size; it grows (doubling) to the largest op's data or result. */
const FIRST_SEGMENT = 64 * 1024;

interface Segment {
  fd: number;
  bytes: number;
  data: Uint8Array;
}

export class LocalLink {
  private segment!: Segment;
  private acks: ((f: ServiceGroupLocalToMember) => void)[] = [];
  private closedWhy: string | null = null;

  private constructor(
    private readonly sock: Socket,
    private readonly addon: ShmAddon,
    private readonly onResult: (r: ServiceGroupResult) => void,
    private readonly onClose: (why: string) => void,
  ) {}

  /**
   * Connects, proves the group's secret both ways (`localKey`: serviceGroupKeys(G).local) and hands
   * over the segment; `{why}` when the agent, the other end or this host cannot do it.
   */
  static async open(
    path: string,
    member: string,
    localKey: Uint8Array,
    timeoutMs: number,
    onResult: (r: ServiceGroupResult) => void,
    onClose: (why: string) => void,
  ): Promise<{ link: LocalLink } | { why: string }> {
    let addon: ShmAddon;
    try {
      // loaded only here: a member on NATS needs no native code
      addon = loadShmAddon();
    } catch (e) {
      return { why: (e as Error).message };
    }
    const sock = connect(path);
    const timer = setTimeout(() => sock.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    try {
      await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
      const link = new LocalLink(sock, addon, onResult, onClose);
      const closed = new Promise<never>((_, reject) => sock.once('close', () => reject(new Error(link.closedWhy ?? 'the agent closed the socket'))));
      closed.catch(() => undefined);
      link.listen();
      const nonce = serviceGroupNonce();
      const challenge = await Promise.race([link.ack({ type: 'hello', member, nonce }), closed]);
      if (challenge.type !== 'challenge' || !serviceGroupProofValid(localKey, 'agent', nonce, challenge.nonce, challenge.proof)) {
        sock.destroy();
        return { why: challenge.type === 'refused' ? challenge.message : 'the socket did not prove the group secret' };
      }
      const seg = link.allocate(FIRST_SEGMENT);
      const proof = serviceGroupLocalProof(localKey, 'member', nonce, challenge.nonce);
      const ack = await Promise.race([link.ack({ type: 'proof', proof, pid: process.pid, fd: seg.fd, bytes: seg.bytes }), closed]);
      if (ack.type !== 'ok') {
        addon.closeFd(seg.fd);
        sock.destroy();
        return { why: ack.type === 'refused' ? ack.message : `unexpected ${ack.type}` };
      }
      link.segment = seg;
      return { link };
    } catch (e) {
      sock.destroy();
      return { why: (e as Error).message };
    } finally {
      clearTimeout(timer);
    }
  }

  private listen(): void {
    readFrames(this.sock, (raw) => {
      const f = ServiceGroupLocalToMemberSchema.safeParse(raw);
      if (!f.success) return void this.sock.destroy(new Error(`bad frame from the agent: ${f.error.issues[0]?.message}`));
      if (f.data.type === 'result') this.onResult(f.data.result);
      else this.acks.shift()?.(f.data);
    });
    this.sock.on('error', (e) => (this.closedWhy = e.message));
    this.sock.once('close', () => this.onClose(this.closedWhy ?? 'the agent closed the local socket'));
  }

  private ack(frame: object): Promise<ServiceGroupLocalToMember> {
    return new Promise((resolve) => {
      this.acks.push(resolve);
      writeFrame(this.sock, frame);
    });
  }

  private allocate(bytes: number): Segment {
    const { fd, buffer } = this.addon.createSegment(bytes);
    return { fd, bytes, data: new Uint8Array(buffer) };
  }

  /** Makes the segment hold at least `bytes` (a new one, mapped by the agent before it is used). */
  async reserve(bytes: number): Promise<void> {
    if (bytes <= this.segment.bytes) return;
    let size = this.segment.bytes;
    while (size < bytes) size *= 2;
    const seg = this.allocate(size);
    const ack = await this.ack({ type: 'segment', pid: process.pid, fd: seg.fd, bytes: seg.bytes });
    if (ack.type !== 'ok') {
      this.addon.closeFd(seg.fd);
      throw new Error(`the agent could not map a segment of ${size} bytes: ${ack.type === 'refused' ? ack.message : ack.type}`);
    }
    this.addon.closeFd(this.segment.fd);
    this.segment = seg;
  }

  /** Whether the segment holds `bytes` now (no reserve() needed). */
  fits(bytes: number): boolean {
    return bytes <= this.segment.bytes;
  }

  /** Puts the op's data at the segment's start and sends the op (reserve() first). */
  send(op: ServiceGroupOp, data: Uint8Array): void {
    this.segment.data.set(data);
    writeFrame(this.sock, { type: 'op', op });
  }

  /** The segment's first `bytes`: a result, valid until the next op is sent (null when the segment is smaller). */
  view(bytes: number): Uint8Array | null {
    return bytes <= this.segment.bytes ? this.segment.data.subarray(0, bytes) : null;
  }

  close(): void {
    this.sock.destroy();
    if (this.segment) this.addon.closeFd(this.segment.fd);
  }
}
