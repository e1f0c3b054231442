// Group commit: requests for one key queue while that key's write is in flight and the next write
// takes all of them, so N concurrent writers to one KV value cost a handful of compare-and-sets
// instead of N (each retrying against the others). Each caller is answered only after the write
// that holds its request is stored, so a crash never loses an acknowledged request.
export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Waiter<I, R> {
  item: I;
  resolve(v: R): void;
  reject(e: unknown): void;
}

export class GroupCommit<I, R> {
  private readonly queues = new Map<string, Waiter<I, R>[]>();
  private readonly flushing = new Set<string>();

  /** `commit` stores every item of one batch at once and answers each, in order. */
  constructor(private readonly commit: (key: string, items: I[]) => Promise<Outcome<R>[]>) {}

  submit(key: string, item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const q = this.queues.get(key);
      if (q) q.push({ item, resolve, reject });
      else this.queues.set(key, [{ item, resolve, reject }]);
      void this.drain(key);
    });
  }

  private async drain(key: string): Promise<void> {
    if (this.flushing.has(key)) return; // the running flush takes this request next
    this.flushing.add(key);
    try {
      for (let batch = this.queues.get(key); batch?.length; batch = this.queues.get(key)) {
        this.queues.delete(key);
        try {
          const out = await this.commit(
            key,
            batch.map((w) => w.item),
          );
          batch.forEach((w, i) => {
            const o = out[i];
            if (o?.ok) w.resolve(o.value);
            else w.reject(o ? o.error : new Error('group commit answered fewer items than it took'));
          });
        } catch (e) {
          for (const w of batch) w.reject(e);
        }
      }
    } finally {
      this.flushing.delete(key);
    }
  }
}
