// A Node process's heap from the outside, through the V8 inspector it opens when started with
// `--inspect=127.0.0.1:0` (e.g. in NODE_OPTIONS): a full garbage collection, then the heap in use,
// or a heap snapshot to compare. For memory tests and benchmarks; nothing ships it.
import WebSocket from 'ws';

export interface HeapUse {
  /** V8 heap in use after a full GC */
  heapUsed: number;
  /** of which compiled code (grows while the JIT warms up, bounded by V8's code flushing) */
  codeUsed: number;
  rss: number;
  external: number;
}

export class Inspector {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private chunks: string[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: { chunk: string } };
      if (msg.method === 'HeapProfiler.addHeapSnapshotChunk') this.chunks.push(msg.params!.chunk);
      if (msg.id === undefined) return;
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(msg.error.message));
      else p?.resolve(msg.result);
    });
    ws.on('close', () => {
      for (const p of this.pending.values()) p.reject(new Error('inspector closed'));
      this.pending.clear();
    });
  }

  static connect(url: string, timeoutMs = 10_000): Promise<Inspector> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { handshakeTimeout: timeoutMs });
      ws.once('open', () => resolve(new Inspector(ws)));
      ws.once('error', reject);
    });
  }

  send<T = unknown>(method: string, params: Record<string, unknown> = {}, timeoutMs = 60_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`inspector: ${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v as T)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** A full GC (twice: the first can leave garbage that finalizers freed), then the process's memory. */
  async heapAfterGc(): Promise<HeapUse> {
    await this.send('HeapProfiler.collectGarbage');
    await this.send('HeapProfiler.collectGarbage');
    const r = await this.send<{ result: { value: HeapUse } }>('Runtime.evaluate', {
      // require comes from the inspector's command-line API
      expression:
        "(() => { const m = process.memoryUsage(); const code = require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'code_space'); " +
        'return { heapUsed: m.heapUsed, codeUsed: code ? code.space_used_size : 0, rss: m.rss, external: m.external }; })()',
      returnByValue: true,
      includeCommandLineAPI: true,
    });
    return r.result.value;
  }

  /** A heap snapshot (.heapsnapshot JSON, as Chrome DevTools reads it). */
  async heapSnapshot(): Promise<string> {
    this.chunks = [];
    await this.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false }, 300_000);
    const s = this.chunks.join('');
    this.chunks = [];
    return s;
  }

  close(): void {
    this.ws.close();
  }
}
