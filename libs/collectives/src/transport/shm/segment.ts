// A mapped segment (this rank's, or a peer's) and the doorbell protocol on its header.
import type { ShmAddon } from './native';
import { H_DOORBELL, H_POLLING, H_SLEEPING } from './layout';

export class Segment {
  readonly i32: Int32Array;
  readonly bytes: Buffer;

  constructor(
    private readonly addon: ShmAddon,
    readonly buffer: ArrayBuffer,
  ) {
    this.i32 = new Int32Array(buffer);
    this.bytes = Buffer.from(buffer);
  }

  /**
   * Tells the segment's owner there is work (data in one of its rings, or space in one it writes
   * to). The futex wake, a system call, only when its waiter sleeps and its loop does not poll.
   */
  ring(): void {
    Atomics.add(this.i32, H_DOORBELL >> 2, 1);
    if (Atomics.load(this.i32, H_SLEEPING >> 2) !== 0 && Atomics.load(this.i32, H_POLLING >> 2) === 0) this.addon.wake(this.buffer, H_DOORBELL);
  }
}
