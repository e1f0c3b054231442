// A mapped segment (this rank's, or a peer's) and the wake-up protocol on its header.
import type { ShmAddon } from './native';
import { H_ARMED } from './layout';

export class Segment {
  readonly i32: Int32Array;
  readonly bytes: Buffer;

  constructor(
    private readonly addon: ShmAddon,
    readonly buffer: ArrayBuffer,
    /** the owner's doorbell (a peer's segment); -1 for this rank's own */
    readonly doorbell = -1,
  ) {
    this.i32 = new Int32Array(buffer);
    this.bytes = Buffer.from(buffer);
  }

  /**
   * Tells the segment's owner there is work (data in one of its rings, or space in one it writes
   * to). Only the first producer after the owner armed it makes the system call; an owner busy
   * polling has not armed it.
   */
  ring(): void {
    if (Atomics.compareExchange(this.i32, H_ARMED >> 2, 1, 0) === 1) this.addon.ring(this.doorbell);
  }

  /** The owner: wake me when something comes. */
  arm(): void {
    Atomics.store(this.i32, H_ARMED >> 2, 1);
  }

  /** The owner: I am looking myself, no wake-up needed. */
  disarm(): void {
    Atomics.store(this.i32, H_ARMED >> 2, 0);
  }
}
