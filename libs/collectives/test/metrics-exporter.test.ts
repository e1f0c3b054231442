// The metrics exporter against real processes: promtool (Prometheus's own parser) accepts what it
// renders, and an open scrape connection does not keep a finished program alive.
import { execFileSync } from 'child_process';
import { CollectiveEvent } from '../src/observers';
import { CollectiveMetrics } from '../src/metrics/exporter';
import { FlightRecorder } from '../src/trace/recorder';

const event = (over: Partial<CollectiveEvent> = {}): CollectiveEvent => ({
  op: 'allReduce',
  algorithm: 'ring',
  backend: 'tcp',
  dtype: 'float32',
  bytes: 4096,
  bytesSent: 3072,
  bytesReceived: 2048,
  durationSeconds: 2e-4,
  worldSize: 2,
  rank: 0,
  group: 'default',
  ...over,
});

const promtool = (text: string) => execFileSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });

it('promtool accepts the histograms, counters and error counts', () => {
  const m = new CollectiveMetrics();
  m.record(event());
  m.record(event({ durationSeconds: 5e-3, bytes: 8 }));
  m.record(event({ op: 'broadcast', error: { name: 'DistTimeoutError', message: 'x', code: 'TIMEOUT' } }));
  expect(promtool(m.render())).toBe('');
});

it("promtool accepts the oldest in-flight op's age gauge", () => {
  const rec = new FlightRecorder(8);
  const m = new CollectiveMetrics(() => rec);
  rec.rank = 3;
  const g = rec.group(0, [0, 3], 3, 'tcp');
  g.collective(0, 'allReduce', 'ring', 'float32', 4, 1000, performance.now() - 2500);
  g.p2p('recv', 0, 'float32', 4, 1000);
  const text = m.render();
  expect(text).toContain('# TYPE cmesh_collective_oldest_inflight_age_seconds gauge');
  expect(promtool(text)).toBe('');
});

it("a scraper's keep-alive connection does not keep a finished program alive", async () => {
  const { spawn } = await import('child_process');
  const http = await import('http');
  // The child's "work" lasts until its stdin closes, so the scrape cannot race its exit.
  const script = `require(${JSON.stringify(require.resolve('../src/metrics/exporter'))}).startMetricsExporter({ port: 0 }).then((e) => { console.log(e.port); process.stdin.resume(); });`;
  const child = spawn(process.execPath, ['-r', '@swc-node/register', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const agent = new http.Agent({ keepAlive: true });
  try {
    const port = await new Promise<number>((r) => child.stdout!.once('data', (d) => r(Number(String(d).trim()))));
    const status = await new Promise<number>((r) =>
      http.get({ host: '127.0.0.1', port, path: '/metrics', agent }, (res) => (res.resume(), r(res.statusCode!))),
    );
    expect(status).toBe(200);
    // the connection stays open on our side; the child must still end at once (not after keepAliveTimeout)
    child.stdin!.end();
    const t0 = Date.now();
    expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 4000))])).toBe(0);
    expect(Date.now() - t0).toBeLessThan(4000);
  } finally {
    agent.destroy();
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}, 20_000);
