import { busBwFactor } from '@cmesh/bench';
import { JobAssignment } from '@cmesh/protocol';
import { AgentMetrics } from './agent-metrics';

const assignment = (op: JobAssignment['sweep']['op']): JobAssignment => ({
  jobId: 'j1',
  storePrefix: 'p',
  members: [
    { agentId: 'a0', name: 'a0', rank: 0 },
    { agentId: 'a1', name: 'a1', rank: 1 },
  ],
  sweep: { op, dtype: 'float32', redop: 'sum', root: 0, sizes: [1024], iters: 3, warmup: 0, check: true, modes: ['out-of-place'], timeoutMs: 1000, backend: 'tcp' },
});

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  if (!line) throw new Error(`no series ${series} in\n${text}`);
  return Number(line.slice(series.length + 1));
}

it('turns size samples into the duration histogram, payload and wire bytes, this rank\'s busbw/algbw and #wrong', async () => {
  const m = new AgentMetrics();
  m.onSize(assignment('allReduce'), 0, { requestedBytes: 1024, bytes: 1024, count: 256, variants: [{ mode: 'out-of-place', times: [2e-6, 4e-6, 1e-3], wrong: 1 }], wire: { sent: 3 * 1024, received: 3 * 1024 + 8 } });
  m.onError(assignment('allReduce'), 'PEER_FAILED');
  const text = await m.registry.metrics();
  const h = 'op="all_reduce",backend="tcp",algorithm="auto",dtype="float32",size_bucket="1024"';
  expect(value(text, `cmesh_collective_duration_seconds_count{${h}}`)).toBe(3);
  expect(value(text, `cmesh_collective_duration_seconds_bucket{le="0.00001",${h}}`)).toBe(2);
  expect(value(text, `cmesh_collective_duration_seconds_bucket{le="0.001",${h}}`)).toBe(3);
  expect(value(text, `cmesh_collective_duration_seconds_sum{${h}}`)).toBeCloseTo(1.006e-3, 12);
  expect(value(text, 'cmesh_collective_payload_bytes_total{op="all_reduce",backend="tcp"}')).toBe(3 * 1024);
  expect(value(text, 'cmesh_collective_bytes_total{op="all_reduce",backend="tcp",direction="sent"}')).toBe(3 * 1024);
  expect(value(text, 'cmesh_collective_bytes_total{op="all_reduce",backend="tcp",direction="received"}')).toBe(3 * 1024 + 8);
  // median 4 µs: algbw = 1024 B / 4 µs, busbw = algbw * 2(n-1)/n = algbw at n = 2
  const bw = 'op="all_reduce",backend="tcp",dtype="float32",size_bytes="1024"';
  expect(value(text, `cmesh_collective_algbw_bytes_per_second{${bw}}`)).toBeCloseTo(1024 / 4e-6, 0);
  expect(value(text, `cmesh_collective_busbw_bytes_per_second{${bw}}`)).toBeCloseTo((1024 / 4e-6) * busBwFactor('allReduce', 2), 0);
  expect(value(text, 'cmesh_collective_wrong_elements_total{op="all_reduce"}')).toBe(1);
  expect(value(text, 'cmesh_collective_errors_total{op="all_reduce",reason="PEER_FAILED"}')).toBe(1);
  expect(text).toContain('process_cpu_seconds_total');
});
