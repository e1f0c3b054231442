// The mesh's Prometheus endpoints (the coordinator's and every agent's /metrics), each scraped
// once so the listing shows they answer: how many cmesh series, and the best busbw exported.
import type { MeshClient } from './client';

export interface MetricsEndpoint {
  name: string;
  url: string;
  cmeshSeries: number;
  bestBusbw?: { op: string; sizeClass: string; bytesPerSecond: number };
  error?: string;
}

async function scrape(name: string, url: string): Promise<MetricsEndpoint> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) return { name, url, cmeshSeries: 0, error: `HTTP ${res.status}` };
    const lines = (await res.text()).split('\n').filter((l) => l.startsWith('cmesh_'));
    let best: MetricsEndpoint['bestBusbw'];
    for (const l of lines) {
      const m = /^cmesh_collective_busbw_bytes_per_second\{(.*)\} (\S+)$/.exec(l);
      if (!m) continue;
      const v = Number(m[2]);
      if (!best || v > best.bytesPerSecond)
        best = { op: /op="([^"]*)"/.exec(m[1])?.[1] ?? '?', sizeClass: /size_class="([^"]*)"/.exec(m[1])?.[1] ?? '?', bytesPerSecond: v };
    }
    return { name, url, cmeshSeries: lines.length, bestBusbw: best };
  } catch (e) {
    return { name, url, cmeshSeries: 0, error: (e as Error).message };
  }
}

export async function metricsEndpoints(client: MeshClient): Promise<MetricsEndpoint[]> {
  const body = await client.get<{ agents?: { name: string; httpUrl?: string }[] }>('/agents');
  const targets = [{ name: 'coordinator', url: `${client.base}/metrics` }];
  for (const a of body.agents ?? []) if (a.httpUrl) targets.push({ name: a.name, url: `${a.httpUrl.replace(/\/+$/, '')}/metrics` });
  return Promise.all(targets.map((t) => scrape(t.name, t.url)));
}

export function formatEndpoints(eps: MetricsEndpoint[]): string {
  const w = Math.max(...eps.map((e) => e.name.length));
  const uw = Math.max(...eps.map((e) => e.url.length));
  return eps
    .map((e) => {
      const what = e.error
        ? `unreachable: ${e.error}`
        : `${e.cmeshSeries} cmesh series${e.bestBusbw ? `, best busbw ${(e.bestBusbw.bytesPerSecond / 1e9).toFixed(2)} GB/s (${e.bestBusbw.op}, sizes <= ${e.bestBusbw.sizeClass} B)` : ''}`;
      return `  ${e.name.padEnd(w)}  ${e.url.padEnd(uw)}  ${what}`;
    })
    .join('\n');
}
