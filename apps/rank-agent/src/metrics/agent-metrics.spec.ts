import { busBwFactor } from '@cmesh/bench';
import { JobAssignment } from '@cmesh/protocol';
import { AgentMetrics } from './agent-metrics';

const assignment = (op: JobAssignment['sweep']['op']): JobAssignment => ({
  jobId: 'j1',
  storePrefix: 'p',
  secret: 'job-secret-0123456789',
  members: [
    { agentId: 'a0', name: 'a0', rank: 0 },
    { agentId: 'a1', name: 'a1', rank: 1 },
  ],
  sweep: {
    op,
    dtype: 'float32',
    redop: 'sum',
    root: 0,
    sizes: [1024],
    iters: 3,
    warmup: 0,
    check: true,
    modes: ['out-of-place'],
    timeoutMs: 1000,
    backend: 'tcp',
  },
});

/** A sample's labels in one order (prom-client puts default labels first in histograms, last elsewhere). */
function canonical(series: string): string {
  const m = /^([^{\s]+)(?:\{(.*)\})?$/.exec(series);
  if (!m) throw new Error(`not a series: ${series}`);
  return `${m[1]}{${(m[2]?.match(/\w+="(?:[^"\\]|\\.)*"/g) ?? []).sort().join(',')}}`;
}

function value(text: string, series: string): number {
  const want = canonical(series);
  const line = text.split('\n').find((l) => l && !l.startsWith('#') && canonical(l.slice(0, l.lastIndexOf(' '))) === want);
  if (!line) throw new Error(`no series ${series} in\n${text}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

it("turns size samples into the duration histogram, payload and wire bytes, this rank's busbw/algbw by size class and #wrong, every series labelled with the cluster", async () => {
  // the agent's cluster (CMESH_CLUSTER) labels every series
  const m = new AgentMetrics('lab');
  m.onSize(assignment('allReduce'), 0, {
    requestedBytes: 1024,
    bytes: 1024,
    count: 256,
    variants: [{ mode: 'out-of-place', times: [2e-6, 4e-6, 1e-3], wrong: 1 }],
    wire: { sent: 3 * 1024, received: 3 * 1024 + 8 },
  });
  m.onError(assignment('allReduce'), 'PEER_FAILED');
  const text = await m.registry.metrics();
  const h = 'op="all_reduce",backend="tcp",algorithm="auto",dtype="float32",size_bucket="1024",cluster="lab"';
  expect(value(text, `cmesh_collective_duration_seconds_count{${h}}`)).toBe(3);
  expect(value(text, `cmesh_collective_duration_seconds_bucket{le="0.00001",${h}}`)).toBe(2);
  expect(value(text, `cmesh_collective_duration_seconds_bucket{le="0.001",${h}}`)).toBe(3);
  expect(value(text, `cmesh_collective_duration_seconds_sum{${h}}`)).toBeCloseTo(1.006e-3, 12);
  expect(value(text, 'cmesh_collective_payload_bytes_total{op="all_reduce",backend="tcp",cluster="lab"}')).toBe(3 * 1024);
  expect(value(text, 'cmesh_collective_bytes_total{op="all_reduce",backend="tcp",direction="sent",cluster="lab"}')).toBe(3 * 1024);
  expect(value(text, 'cmesh_collective_bytes_total{op="all_reduce",backend="tcp",direction="received",cluster="lab"}')).toBe(3 * 1024 + 8);
  // median 4 µs: algbw = 1024 B / 4 µs, busbw = algbw * 2(n-1)/n = algbw at n = 2
  const bw = 'op="all_reduce",backend="tcp",dtype="float32",size_class="1024",cluster="lab"';
  expect(value(text, `cmesh_collective_algbw_bytes_per_second{${bw}}`)).toBeCloseTo(1024 / 4e-6, 0);
  expect(value(text, `cmesh_collective_busbw_bytes_per_second{${bw}}`)).toBeCloseTo((1024 / 4e-6) * busBwFactor('allReduce', 2), 0);
  expect(value(text, 'cmesh_collective_wrong_elements_total{op="all_reduce",cluster="lab"}')).toBe(1);
  expect(value(text, 'cmesh_collective_errors_total{op="all_reduce",reason="PEER_FAILED",cluster="lab"}')).toBe(1);
  expect(text).toMatch(/^process_cpu_seconds_total\{cluster="lab"\} /m);
  // what the target is: dashboards find the agents' scrape job by it
  expect(value(text, 'cmesh_component_info{component="agent",protocol_version="1",cluster="lab"}')).toBe(1);
  // a size between two powers of two goes to the class above; never a raw size in a label
  m.onSize(assignment('allReduce'), 0, { requestedBytes: 3000, bytes: 3000, count: 750, variants: [{ mode: 'out-of-place', times: [4e-6], wrong: 0 }] });
  const after = await m.registry.metrics();
  expect(after).toMatch(/^cmesh_collective_busbw_bytes_per_second\{[^}]*size_class="4096"[^}]*\} /m);
  expect(after).not.toContain('size_bytes');
  expect(after).not.toContain('"3000"');
});

it("records service group ops by group name, op and dtype; bus bytes with the op's factor; failures by reason; names capped", async () => {
  const m = new AgentMetrics();
  const op = { name: 'grads', op: 'allGather', dtype: 'int32', size: 4, bytes: 4096, seconds: 2e-3 } as const;
  m.onServiceOp(op);
  m.onServiceOp({ ...op, seconds: 0.5 });
  m.onServiceOp({ ...op, op: 'barrier', dtype: 'uint8', bytes: 0, seconds: 1e-4 });
  m.onServiceOp({ ...op, error: 'PEER_FAILURE' });
  for (let i = 0; i < 40; i++) m.onServiceOp({ ...op, name: `g${i}`, op: 'allReduce', dtype: 'float32', bytes: 8 });
  const text = await m.registry.metrics();
  const l = 'group="grads",op="all_gather",dtype="int32",cluster="default"';
  expect(value(text, `cmesh_service_op_duration_seconds_count{${l}}`)).toBe(2);
  expect(value(text, `cmesh_service_op_duration_seconds_bucket{le="0.003",${l}}`)).toBe(1);
  expect(value(text, `cmesh_service_op_duration_seconds_sum{${l}}`)).toBeCloseTo(0.502, 12);
  expect(value(text, `cmesh_service_op_bytes_total{${l}}`)).toBe(8192);
  expect(value(text, `cmesh_service_op_bus_bytes_total{${l}}`)).toBeCloseTo(8192 * busBwFactor('allGather', 4), 9);
  expect(value(text, 'cmesh_service_op_duration_seconds_count{group="grads",op="barrier",dtype="uint8",cluster="default"}')).toBe(1);
  expect(text).not.toMatch(/cmesh_service_op_bus_bytes_total\{[^}]*op="barrier"/);
  expect(value(text, 'cmesh_service_op_errors_total{group="grads",op="all_gather",reason="PEER_FAILURE",cluster="default"}')).toBe(1);
  // "grads" and the first 31 other names keep their label; the last 9 count together
  expect(value(text, 'cmesh_service_op_bytes_total{group="g30",op="all_reduce",dtype="float32",cluster="default"}')).toBe(8);
  expect(text).not.toContain('group="g31"');
  expect(value(text, 'cmesh_service_op_bytes_total{group="_other",op="all_reduce",dtype="float32",cluster="default"}')).toBe(9 * 8);
  expect(new Set([...text.matchAll(/cmesh_service_op_bytes_total\{group="([^"]+)"/g)].map((x) => x[1])).size).toBe(33);
});
