// Work: the handle of an asynchronous operation (torch's Work / c10d::Work).
import { DistTimeoutError } from './errors';
import { timerMs } from './timer';

export class Work<T = void> {
  private completed = false;
  private error?: Error;
  private value?: T;
  private readonly promise: Promise<T>;

  constructor(
    promise: Promise<T>,
    readonly op: string,
  ) {
    this.promise = promise.then(
      (v) => {
        this.completed = true;
        this.value = v;
        return v;
      },
      (err: Error) => {
        this.completed = true;
        this.error = err;
        throw err;
      },
    );
    this.promise.catch(() => {}); // the error is reported through wait()/exception()
  }

  isCompleted(): boolean {
    return this.completed;
  }

  isSuccess(): boolean {
    return this.completed && !this.error;
  }

  exception(): Error | undefined {
    return this.error;
  }

  /** The value of the operation (recv: the sender's rank). */
  result(): T | undefined {
    return this.value;
  }

  /** Waits for completion; rethrows the operation's error. With a timeout, DistTimeoutError after it. */
  async wait(timeoutMs?: number): Promise<true> {
    if (timeoutMs === undefined) {
      await this.promise;
      return true;
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DistTimeoutError(`Work.wait: ${this.op} did not complete within ${timeoutMs} ms`)), timerMs(timeoutMs));
    });
    try {
      await Promise.race([this.promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
    return true;
  }

  /** Lets `await work` work like `await work.wait()`. */
  then<R1 = T, R2 = never>(onOk?: (v: T) => R1 | PromiseLike<R1>, onErr?: (e: unknown) => R2 | PromiseLike<R2>): Promise<R1 | R2> {
    return this.promise.then(onOk, onErr);
  }
}
