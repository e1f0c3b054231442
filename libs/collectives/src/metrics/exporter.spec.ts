import { InvalidArgumentError } from '../errors';
import { CollectiveEvent, notifyCollective } from '../observers';
import { CollectiveMetrics, startExporterFromEnv, startLauncherExporter, startMetricsExporter } from './exporter';
import { CounterVec, HistogramVec } from './exposition';
import { opLabel, sizeBucket } from './names';
import { FlightRecorder } from '../trace/recorder';

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

const sample = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  if (!line) throw new Error(`no ${series} in\n${text}`);
  return Number(line.slice(series.length + 1));
};

it('size buckets are powers of four, bounded; op labels are snake_case', () => {
  expect([0, 1, 2, 4, 5, 16, 17, 1024, 1025, 1 << 30, (1 << 30) + 1].map(sizeBucket)).toEqual([
    '0',
    '1',
    '4',
    '4',
    '16',
    '16',
    '64',
    '1024',
    '4096',
    '1073741824',
    '+Inf',
  ]);
  expect(['allReduce', 'reduceScatter', 'allToAll', 'broadcast', 'all_gather'].map(opLabel)).toEqual([
    'all_reduce',
    'reduce_scatter',
    'all_to_all',
    'broadcast',
    'all_gather',
  ]);
});

it('renders cumulative histograms, counters and escaped labels', () => {
  const m = new CollectiveMetrics();
  m.record(event());
  m.record(event({ durationSeconds: 5e-3, bytes: 8 }));
  m.record(event({ op: 'broadcast', error: { name: 'DistTimeoutError', message: 'x', code: 'TIMEOUT' } }));
  const text = m.render();
  const h = 'algorithm="ring",backend="tcp",cluster="default",dtype="float32",op="all_reduce",size_bucket="4096"';
  expect(sample(text, `cmesh_collective_duration_seconds_bucket{${h},le="0.0001"}`)).toBe(0);
  expect(sample(text, `cmesh_collective_duration_seconds_bucket{${h},le="0.0003"}`)).toBe(1);
  expect(sample(text, `cmesh_collective_duration_seconds_bucket{${h},le="+Inf"}`)).toBe(1);
  expect(sample(text, `cmesh_collective_duration_seconds_count{${h.replace('4096', '16')}}`)).toBe(1);
  expect(sample(text, 'cmesh_collective_bytes_total{backend="tcp",cluster="default",direction="sent",op="all_reduce"}')).toBe(6144);
  expect(sample(text, 'cmesh_collective_bytes_total{backend="tcp",cluster="default",direction="received",op="all_reduce"}')).toBe(4096);
  expect(sample(text, 'cmesh_collective_payload_bytes_total{backend="tcp",cluster="default",op="all_reduce"}')).toBe(4104);
  expect(sample(text, 'cmesh_collective_errors_total{cluster="default",op="broadcast",reason="TIMEOUT"}')).toBe(1);

  const c = new CounterVec('x_total', 'h');
  c.inc({ path: 'a"b\\c\nd' });
  expect(c.render().split('\n')[2]).toBe('x_total{path="a\\"b\\\\c\\nd"} 1');
  const hv = new HistogramVec('y_seconds', 'h', [1]);
  hv.observe({}, 2);
  expect(hv.render()).toContain('y_seconds_bucket{le="1"} 0\ny_seconds_bucket{le="+Inf"} 1');
});

it("exports the oldest in-flight op's age per rank from the flight recorder, read at the scrape", () => {
  const rec = new FlightRecorder(8);
  const m = new CollectiveMetrics(() => rec);
  expect(m.render()).not.toContain('cmesh_collective_oldest_inflight_age_seconds'); // no rank yet
  rec.rank = 3;
  const g = rec.group(0, [0, 3], 3, 'tcp');
  expect(sample(m.render(), 'cmesh_collective_oldest_inflight_age_seconds{cluster="default",rank="3"}')).toBe(0);
  const old = g.collective(0, 'allReduce', 'ring', 'float32', 4, 1000, performance.now() - 2500);
  g.p2p('recv', 0, 'float32', 4, 1000);
  const text = m.render();
  expect(text).toContain('# TYPE cmesh_collective_oldest_inflight_age_seconds gauge');
  const age = sample(text, 'cmesh_collective_oldest_inflight_age_seconds{cluster="default",rank="3"}');
  expect(age).toBeGreaterThanOrEqual(2.5);
  expect(age).toBeLessThan(60);
  g.completed(old);
  expect(sample(m.render(), 'cmesh_collective_oldest_inflight_age_seconds{cluster="default",rank="3"}')).toBeLessThan(2.5);
  expect(new CollectiveMetrics(() => new FlightRecorder(0)).render()).not.toContain('inflight');
});

it('serves /metrics on a port, hears every collective through the observers, and closes', async () => {
  const exp = await startMetricsExporter({ port: 0, cluster: 'lab' });
  try {
    notifyCollective(event({ op: 'allGather', bytes: 64 }));
    const res = await fetch(exp.url);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(sample(text, 'cmesh_collective_payload_bytes_total{backend="tcp",cluster="lab",op="all_gather"}')).toBe(64);
    expect((await fetch(exp.url.replace('/metrics', '/nope'))).status).toBe(404);
  } finally {
    await exp.close();
  }
  // closed: no longer observing, no longer listening
  await expect(fetch(exp.url)).rejects.toThrow();
  await expect(startMetricsExporter({ port: 70000 })).rejects.toThrow(InvalidArgumentError);
});

it('CMESH_METRICS_PORT: off unless set; each local rank on base + LOCAL_RANK', async () => {
  expect(await startExporterFromEnv({})).toBeUndefined();
  const probe = await startMetricsExporter({ port: 0 });
  const base = probe.port;
  await probe.close();
  const exp = await startExporterFromEnv({ CMESH_METRICS_PORT: String(base - 1), LOCAL_RANK: '1' });
  try {
    expect(exp!.port).toBe(base);
  } finally {
    await exp!.close();
  }
});

it("the launcher's request: CMESH_RUN_METRICS_PORT (the rank's own port), never CMESH_METRICS_PORT", async () => {
  expect(await startLauncherExporter({})).toBeUndefined();
  expect(await startLauncherExporter({ CMESH_METRICS_PORT: '0', LOCAL_RANK: '0' })).toBeUndefined();
  expect(await startLauncherExporter({ CMESH_RUN_METRICS_PORT: '' })).toBeUndefined();
  const exp = await startLauncherExporter({ CMESH_RUN_METRICS_PORT: '0', CMESH_RUN_METRICS_HOST: '127.0.0.1', LOCAL_RANK: '1' });
  try {
    expect(exp!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect((await fetch(exp!.url)).status).toBe(200);
  } finally {
    await exp!.close();
  }
});
