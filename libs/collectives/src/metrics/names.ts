// The library's metric names, help texts, labels and buckets: what its opt-in exporter serves and
// the agents' sweeps report (Prometheus conventions: base units, _seconds, _bytes, _total; labels
// of bounded cardinality: sizes go into a fixed list of size classes, never raw). @cmesh/protocol
// adds the mesh's own (METRICS), the coordinator its catalogue.

export const COLLECTIVE_METRICS = {
  collectiveDuration: {
    name: 'cmesh_collective_duration_seconds',
    help: 'Time of one collective call (per rank), by op, backend, algorithm, dtype and message size bucket',
    labels: ['op', 'backend', 'algorithm', 'dtype', 'size_bucket'],
  },
  collectiveBytes: {
    name: 'cmesh_collective_bytes_total',
    help: 'Bytes this rank sent and received on the data plane, by op, backend and direction',
    labels: ['op', 'backend', 'direction'],
  },
  collectivePayloadBytes: {
    name: 'cmesh_collective_payload_bytes_total',
    help: 'Bytes of the tensors collectives ran on (the per-rank size nccl-tests reports, once per call), by op and backend',
    labels: ['op', 'backend'],
  },
  collectiveBusbw: {
    name: 'cmesh_collective_busbw_bytes_per_second',
    help: 'Bus bandwidth of the last sweep per op and size class (nccl-tests factors; the largest size of the sweep in each power-of-two class)',
    labels: ['op', 'backend', 'dtype', 'size_class'],
  },
  collectiveAlgbw: {
    name: 'cmesh_collective_algbw_bytes_per_second',
    help: 'Algorithm bandwidth (size / time) of the last sweep per op and size class (the largest size of the sweep in each power-of-two class)',
    labels: ['op', 'backend', 'dtype', 'size_class'],
  },
  collectiveOldestInflightAge: {
    name: 'cmesh_collective_oldest_inflight_age_seconds',
    help: 'Age of the oldest collective or send/recv this rank has in flight, from the flight recorder (0 when none)',
    labels: ['rank'],
  },
  collectiveErrors: {
    name: 'cmesh_collective_errors_total',
    help: 'Collective calls or jobs that failed, by op and reason',
    labels: ['op', 'reason'],
  },
  collectiveWrong: {
    name: 'cmesh_collective_wrong_elements_total',
    help: 'Elements that failed verification in sweeps (nccl-tests #wrong)',
    labels: ['op'],
  },
  rendezvousDuration: {
    name: 'cmesh_rendezvous_duration_seconds',
    help: 'From the first join to the close of a rendezvous round',
    labels: [],
  },
} as const;

/**
 * The op label: torch's and nccl-tests' snake_case names (allReduce -> all_reduce), one
 * vocabulary for every exporter. Kept snake_case on purpose: the dashboards, alert rules and
 * recorded series select on it (op="all_reduce"), so it must not follow the API's spelling.
 */
export function opLabel(op: string): string {
  return op.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** Duration buckets from 10 µs to ~100 s. */
export const DURATION_BUCKETS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100];

/** Size bucket label: the power of four at or above the size ("0", "4", "16", ... "1073741824", "+Inf"). */
export function sizeBucket(bytes: number): string {
  if (bytes <= 0) return '0';
  let b = 1;
  while (b < bytes && b < 1 << 30) b *= 4;
  return bytes > b ? '+Inf' : String(b);
}

/** The largest size class: 16 GiB (nccl-tests' sweeps rarely pass 8 GiB); anything larger is "+Inf". */
export const MAX_SIZE_CLASS = 2 ** 34;

/**
 * Size class label of the last-sweep gauges: the power of two at or above the size ("0", "1",
 * "2", "4", ... "17179869184", "+Inf"), at most 37 values whatever sizes a sweep uses. Power of
 * two, not four like sizeBucket: nccl-tests' default sweep doubles (-f 2), so each size keeps its
 * own series; sizes closer than that share one (the sweep's last, i.e. largest, wins).
 */
export function sizeClass(bytes: number): string {
  if (!(bytes > 0)) return '0';
  if (bytes > MAX_SIZE_CLASS) return '+Inf';
  let c = 1;
  while (c < bytes) c *= 2;
  return String(c);
}
