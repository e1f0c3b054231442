// What one participant of a service group sends to one other over NATS (a member's ops to its
// agent, the agent's results back) after this side's connection dropped waits until that peer is
// heard again: core NATS keeps nothing, so a message published before the peer re-subscribed
// after the same outage would be lost. A heartbeat from the peer, heard after our reconnect, was
// sent on a connection whose subscriptions were already back (a client sends its SUBs first).
import type { OwnConnection } from './liveness';

export class PeerGate {
  private open = true;
  private held: (() => void)[] = [];
  /** the peer's reconnects as last heard */
  private peerUp = 0;
  private readonly unwatch: () => void;

  /** `onReopen`: the peer is heard again after an outage, before what waited goes (to send again what the outage may have lost) */
  constructor(
    conn: OwnConnection,
    private readonly onReopen?: () => void,
  ) {
    this.unwatch = conn.onChange((up) => {
      if (!up) this.open = false;
    });
  }

  /**
   * The peer was heard: what waited goes now, in order. `peerUp`: how often the peer's own
   * connection came back (its heartbeat says); when that rose, what was sent to it meanwhile is
   * lost too, and onReopen runs as after an outage of ours.
   */
  heard(peerUp = 0): void {
    const peerBack = peerUp > this.peerUp;
    if (peerBack) this.peerUp = peerUp;
    if (this.open) {
      if (peerBack) this.onReopen?.();
      return;
    }
    this.open = true;
    this.onReopen?.();
    for (const send of this.held.splice(0)) send();
  }

  /** Sends now, or once the peer is heard again. */
  send(send: () => void): void {
    if (this.open) send();
    else this.held.push(send);
  }

  get waiting(): number {
    return this.held.length;
  }

  close(): void {
    this.unwatch();
    this.held = [];
  }
}
