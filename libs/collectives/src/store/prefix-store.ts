// PrefixStore: namespaces every key of an underlying store (c10d's PrefixStore).
import { Store, StoreValue } from './store';
import { checkKey, checkKeys } from './validate';

export class PrefixStore implements Store {
  constructor(
    readonly prefix: string,
    readonly base: Store,
  ) {
    checkKey(prefix);
  }

  get timeoutMs(): number {
    return this.base.timeoutMs;
  }
  set timeoutMs(ms: number) {
    this.base.timeoutMs = ms;
  }

  private k(key: string): string {
    checkKey(key);
    return `${this.prefix}/${key}`;
  }

  set(key: string, value: StoreValue) {
    return this.base.set(this.k(key), value);
  }
  get(key: string, timeoutMs?: number) {
    return this.base.get(this.k(key), timeoutMs);
  }
  add(key: string, amount: number) {
    return this.base.add(this.k(key), amount);
  }
  compareSet(key: string, expected: StoreValue, desired: StoreValue) {
    return this.base.compareSet(this.k(key), expected, desired);
  }
  wait(keys: string[], timeoutMs?: number) {
    checkKeys(keys);
    return this.base.wait(
      keys.map((k) => this.k(k)),
      timeoutMs,
    );
  }
  check(keys: string[]) {
    checkKeys(keys);
    return this.base.check(keys.map((k) => this.k(k)));
  }
  deleteKey(key: string) {
    return this.base.deleteKey(this.k(key));
  }
  /** Like c10d, counts the keys of the whole underlying store. */
  numKeys() {
    return this.base.numKeys();
  }
  /** The prefix view does not own the underlying store. */
  async close(): Promise<void> {}
}
