// The Comm an algorithm sees for one collective call: group ranks mapped to world ranks, every
// message tagged with the call's sequence number and op signature, bytes counted, and the
// receives still outstanding tracked so that timeouts can name the peers still awaited.
import type { Comm } from './comm';
import { FrameKind, OpSignature } from './frame';
import type { Mesh } from './mesh';

export class OpComm implements Comm {
  bytesSent = 0;
  bytesReceived = 0;
  private readonly outstanding = new Map<number, number>(); // group rank -> open receives
  private readonly cancels = new Set<() => boolean>();

  constructor(
    private readonly mesh: Mesh,
    readonly rank: number,
    readonly size: number,
    private readonly worldRanks: readonly number[],
    private readonly groupId: number,
    readonly tag: number,
    private readonly sig: OpSignature,
    /** host of each group rank (Comm.hosts) */
    readonly hosts?: readonly number[],
  ) {}

  send(peer: number, data: Uint8Array): Promise<void> {
    this.bytesSent += data.byteLength;
    return handled(this.mesh.send(this.worldRanks[peer], FrameKind.Collective, this.groupId, this.tag, this.sig, data));
  }

  recv(peer: number, into: Uint8Array): Promise<void> {
    this.outstanding.set(peer, (this.outstanding.get(peer) ?? 0) + 1);
    const { done, cancel } = this.mesh.recv(this.worldRanks[peer], FrameKind.Collective, this.groupId, this.tag, this.sig, into);
    this.cancels.add(cancel);
    return handled(
      done.then(() => {
        this.cancels.delete(cancel);
        this.bytesReceived += into.byteLength;
        const n = this.outstanding.get(peer)! - 1;
        if (n) this.outstanding.set(peer, n);
        else this.outstanding.delete(peer);
      }),
    );
  }

  /** World ranks this op is still waiting to hear from. */
  awaitedPeers(): number[] {
    return [...this.outstanding.keys()].map((p) => this.worldRanks[p]).sort((a, b) => a - b);
  }

  /** Withdraws every receive not yet matched (after a timeout or failure). */
  cancelAll(): void {
    for (const c of this.cancels) c();
    this.cancels.clear();
  }
}

/**
 * Marks a transfer's failure as handled: algorithms post many transfers ahead and stop awaiting
 * them at the first failure (which the op reports), so the rest must not crash the process as
 * unhandled rejections. Awaiting the promise still throws.
 */
function handled(p: Promise<void>): Promise<void> {
  p.catch(() => {});
  return p;
}
