// Where one NCCL run reads and writes, as nccl-tests lays out its buffers: out of place, a send
// and a receive buffer; in place, one buffer (all_reduce, broadcast, reduce), the input as this
// rank's block of the output (all_gather) or the output as this rank's block of the input
// (reduce_scatter). Offsets are bytes into the sidecar's device buffers.
import type { BenchMode } from '@cmesh/protocol';
import type { BenchShape, InPlaceLayout } from '../collectives';

export interface DeviceBuffers {
  /** the sidecar's handle of the send buffer (out of place only) */
  send: number;
  /** the receive buffer, which in place is the only one */
  recv: number;
}

export interface RunLayout {
  sendBuf: number;
  sendOffset: number;
  recvBuf: number;
  recvOffset: number;
  /** bytes of the buffer the receive side lives in that must be reset before a checked run */
  resetBytes: number;
}

/** Bytes each device buffer needs for a shape in every mode (in place, the larger of the two extents). */
export function bufferBytes(shape: BenchShape, elemBytes: number): { send: number; recv: number } {
  const send = shape.sendCount * elemBytes;
  const recv = shape.recvCount * elemBytes;
  return { send, recv: Math.max(send, recv) };
}

export function runLayout(layout: InPlaceLayout, mode: BenchMode, b: DeviceBuffers, shape: BenchShape, elemBytes: number, rank: number): RunLayout {
  const recvBytes = shape.recvCount * elemBytes;
  if (mode === 'out-of-place') return { sendBuf: b.send, sendOffset: 0, recvBuf: b.recv, recvOffset: 0, resetBytes: recvBytes };
  switch (layout) {
    case 'same':
      return { sendBuf: b.recv, sendOffset: 0, recvBuf: b.recv, recvOffset: 0, resetBytes: 0 };
    case 'send-in-recv':
      return { sendBuf: b.recv, sendOffset: rank * shape.sendCount * elemBytes, recvBuf: b.recv, recvOffset: 0, resetBytes: recvBytes };
    case 'recv-in-send':
      return { sendBuf: b.recv, sendOffset: 0, recvBuf: b.recv, recvOffset: rank * shape.recvCount * elemBytes, resetBytes: 0 };
    case 'none':
      throw new RangeError('this collective has no in-place form');
  }
}
