// An in-process Store for a sweep whose ranks all live in one Node process (each with its own
// sidecar), as scripts/gpu-check runs them: the unique id goes through it as it would through the
// coordinator's store.
import { DistTimeoutError, Store, StoreValue, toBuffer } from '@cmesh/collectives';

export class MemoryStore implements Store {
  timeoutMs = 300_000;
  private readonly data = new Map<string, Buffer>();
  private waiters: Array<() => void> = [];

  async set(key: string, value: StoreValue): Promise<void> {
    this.data.set(key, Buffer.from(toBuffer(value)));
    this.wake();
  }

  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    await this.wait([key], timeoutMs);
    return this.data.get(key)!;
  }

  async add(key: string, amount: number): Promise<number> {
    const v = Number(this.data.get(key)?.toString() ?? '0') + amount;
    await this.set(key, String(v));
    return v;
  }

  async compareSet(key: string, expected: StoreValue, desired: StoreValue): Promise<Buffer> {
    const cur = this.data.get(key);
    const exp = toBuffer(expected);
    if ((cur === undefined && exp.length === 0) || (cur !== undefined && cur.equals(exp))) await this.set(key, desired);
    return this.data.get(key) ?? Buffer.alloc(0);
  }

  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missing = keys.filter((k) => !this.data.has(k));
      if (missing.length === 0) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new DistTimeoutError(`store keys not set within ${timeoutMs} ms: ${missing.join(', ')}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async check(keys: string[]): Promise<boolean> {
    return keys.every((k) => this.data.has(k));
  }

  async deleteKey(key: string): Promise<boolean> {
    return this.data.delete(key);
  }

  async numKeys(): Promise<number> {
    return this.data.size;
  }

  async close(): Promise<void> {
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }
}
