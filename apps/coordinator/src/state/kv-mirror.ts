// Every record under one KV prefix, in memory, kept current by a KV watch: listing N agents is a
// map walk rather than N reads of JetStream. Writes of this replica are applied at once (a later
// watch entry of the same key supersedes them), so a replica reads its own writes. A record that
// is not valid is skipped (counted and logged by the state's RecordCheck), and drops an earlier
// value of its key: nothing a bucket holds can end the watch.
import { QueuedIterator } from '@nats-io/nats-core';
import { KvWatchEntry } from '@nats-io/kv';
import { KvState } from './kv-state';

export class KvMirror<T> {
  private readonly records = new Map<string, T>();
  private watcher?: QueuedIterator<KvWatchEntry>;
  private ready = false;

  /** `state`: the bucket, whose records are checked with their schemas */
  constructor(
    private readonly state: KvState,
    private readonly prefix: string,
  ) {}

  /** Starts watching; resolves once the current values are loaded. */
  async start(): Promise<void> {
    let loaded!: () => void;
    const initialized = new Promise<void>((r) => (loaded = r));
    this.watcher = await this.state.kv.watch({ key: `${this.prefix}>` });
    void (async () => {
      for await (const e of this.watcher!) {
        const id = e.key.substring(this.prefix.length);
        const rec = this.state.decode<T>(e);
        if (rec !== undefined) this.records.set(id, rec);
        else this.records.delete(id);
        // the last value the bucket held when the watch began (nothing pending), or a later write
        if (e.delta === 0 || e.isUpdate) loaded();
      }
    })().catch(() => undefined);
    // nothing under the prefix (not even a delete marker): the watch has no value to deliver
    // until a write, and the mirror is complete as it is
    if (!(await this.state.stream.keys(`${this.prefix}>`)).length) loaded();
    await initialized;
    this.ready = true;
  }

  stop(): void {
    this.watcher?.stop();
  }

  /** Whether the initial values are in (before that, read KV). */
  get isReady(): boolean {
    return this.ready;
  }

  get(id: string): T | undefined {
    return this.records.get(id);
  }

  set(id: string, value: T): void {
    this.records.set(id, value);
  }

  delete(id: string): void {
    this.records.delete(id);
  }

  values(): T[] {
    return [...this.records.values()];
  }
}
