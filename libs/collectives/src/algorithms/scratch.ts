// Reusable working memory for algorithms, so a collective allocates nothing per call once warm.
// One Scratch serves one operation at a time: the caller (op layer) keeps one per in-flight op.
import { DType, Tensor, elementSize, viewAs } from '../tensor/dtype';

const ALIGN = 8; // every carved region starts 8-byte aligned so any dtype can view it

function alignUp(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN;
}

export class Scratch {
  private buf = new Uint8Array(0);
  private sub?: Scratch;

  /** A second Scratch, for what an algorithm keeps while it runs others on this one. */
  get child(): Scratch {
    return (this.sub ??= new Scratch());
  }

  /** Bytes currently held. */
  get capacity(): number {
    return this.buf.byteLength;
  }

  /**
   * A view of exactly `bytes` bytes at offset 0. Grows (at least doubling) when too small; earlier
   * views stay valid memory but no longer alias the new buffer, so call get() once per operation.
   */
  get(bytes: number): Uint8Array {
    if (bytes > this.buf.byteLength) this.buf = new Uint8Array(Math.max(alignUp(bytes), this.buf.byteLength * 2));
    return this.buf.subarray(0, bytes);
  }

  /** Several non-overlapping typed regions of `dtype` with the given element counts, from one get(). */
  tensors(dtype: DType, ...counts: number[]): Tensor[] {
    const es = elementSize(dtype);
    let total = 0;
    for (const c of counts) total += alignUp(c * es);
    const region = this.get(total);
    const out: Tensor[] = [];
    let off = 0;
    for (const c of counts) {
      out.push(viewAs(region.subarray(off, off + c * es), dtype));
      off += alignUp(c * es);
    }
    return out;
  }

  /** Drops the memory (e.g. after a very large one-off operation). */
  release(): void {
    this.buf = new Uint8Array(0);
    this.sub = undefined;
  }
}
