// The seam between the transport and the algorithms: a per-operation view of a group.
// The process group creates one Comm per collective call, bound to that call's sequence number,
// so concurrent (async) operations never mix their messages. Ranks here are group ranks.

export interface Comm {
  /** This process's rank in the group. */
  readonly rank: number;
  /** Number of ranks in the group. */
  readonly size: number;
  /**
   * Host of every group rank (0, 1, ... in order of each host's lowest rank), where known:
   * ranks with the same number share a host. Absent: treat the group as one host.
   */
  readonly hosts?: readonly number[];
  /**
   * Sends bytes to a group peer. Resolves once the bytes are handed to the kernel; the caller may
   * reuse `data` afterwards. Messages between a pair within one op arrive in order.
   */
  send(peer: number, data: Uint8Array): Promise<void>;
  /** Receives exactly `into.byteLength` bytes from a group peer, straight into `into`. */
  recv(peer: number, into: Uint8Array): Promise<void>;
}
