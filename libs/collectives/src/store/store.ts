// The c10d Store contract: a small key-value service every rank of a job can reach.
// Implementations: TcpStore (server + clients), FileStore, PrefixStore, and the coordinator's
// JetStream KV store (apps/coordinator, libs via `nats://`).

export type StoreValue = Uint8Array | string;

export interface Store {
  /** Default timeout (ms) for get/wait; settable like c10d's set_timeout. */
  timeoutMs: number;
  set(key: string, value: StoreValue): Promise<void>;
  /** Waits until the key exists (up to the timeout), then returns its value. */
  get(key: string, timeoutMs?: number): Promise<Buffer>;
  /** Atomically adds to an integer counter (created at 0) and returns the new value. */
  add(key: string, amount: number): Promise<number>;
  /**
   * c10d compare_set: if the key holds `expected` (or is missing and `expected` is empty),
   * store `desired`; returns the value the key holds afterwards.
   */
  compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Buffer>;
  /** Waits until every key exists; DistTimeoutError naming the missing keys otherwise. */
  wait(keys: string[], timeoutMs?: number): Promise<void>;
  /** True when every key exists, without waiting. */
  check(keys: string[]): Promise<boolean>;
  deleteKey(key: string): Promise<boolean>;
  numKeys(): Promise<number>;
  close(): Promise<void>;
}

export function toBuffer(v: StoreValue): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}
