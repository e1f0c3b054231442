// A warning per key at most once per interval, so a flood of bad messages cannot fill the disk:
// the first occurrence is logged at once, later ones within the interval are counted and
// summarised ("and N more") when the interval ends.
export class RateLimitedLog {
  private readonly keys = new Map<string, { last: number; suppressed: number; line: string }>();
  private timer: NodeJS.Timeout | null = null;

  /** Keys are few (the callers' subjects times reasons), and each is forgotten once its interval ends. */
  constructor(
    private readonly write: (line: string) => void,
    private readonly intervalMs: number,
  ) {}

  report(key: string, line: string): void {
    const now = Date.now();
    const k = this.keys.get(key);
    if (k && now - k.last < this.intervalMs) {
      k.suppressed++;
      k.line = line;
      this.schedule();
      return;
    }
    if (k?.suppressed) this.write(summary(k.line, k.suppressed));
    this.write(line);
    this.keys.set(key, { last: now, suppressed: 0, line });
  }

  /** Writes the summaries of every interval that has ended. */
  flush(now = Date.now()): void {
    for (const [key, k] of this.keys) {
      if (now - k.last < this.intervalMs) continue;
      if (k.suppressed) this.write(summary(k.line, k.suppressed));
      this.keys.delete(key);
    }
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
      if ([...this.keys.values()].some((k) => k.suppressed)) this.schedule();
    }, this.intervalMs);
    this.timer.unref();
  }
}

function summary(line: string, n: number): string {
  return `${line} (and ${n} more like it in the last interval)`;
}
