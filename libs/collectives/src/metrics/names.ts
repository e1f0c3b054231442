// Metric names, help texts, labels and buckets shared by the coordinator, the agents and the
// library's opt-in exporter (Prometheus conventions: base units, _seconds, _bytes, _total; labels
// of bounded cardinality: sizes go into a fixed list of size classes, never raw). libs/protocol
// re-exports them.

export const METRICS = {
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
  rejectedMessages: {
    name: 'cmesh_rejected_messages_total',
    help: 'Inbound NATS messages dropped or answered with an error, by subscription subject and reason (not_json, too_large, invalid, handler_error)',
    labels: ['subject', 'reason'],
  },
  // what a target is, so dashboards find the coordinator's and the agents' scrape jobs by their
  // series, whatever the jobs are called
  componentInfo: {
    name: 'cmesh_component_info',
    help: 'Always 1: the cmesh component this process is (coordinator or agent) and the protocol version it speaks',
    labels: ['component', 'protocol_version'],
  },
  agents: { name: 'cmesh_agents', help: 'Registered agents by state', labels: ['state'] },
  groups: { name: 'cmesh_groups', help: 'Process groups allocated by the coordinator', labels: [] },
  heartbeatGap: {
    name: 'cmesh_agent_heartbeat_gap_seconds',
    help: 'Seconds since each agent was last heard from',
    labels: ['agent'],
  },
  jobs: { name: 'cmesh_jobs_total', help: 'Jobs finished, by final state', labels: ['state'] },
  // fabric scans (the coordinator, from the newest finished scans in the cluster's scans bucket)
  scanAgentBandwidthRatio: {
    name: 'cmesh_scan_agent_bandwidth_ratio',
    help: "Last scan: the agent's median link bandwidth / the scan's reference (median over agents)",
    labels: ['agent'],
  },
  scanAgentPreviousBandwidthRatio: {
    name: 'cmesh_scan_agent_previous_bandwidth_ratio',
    help: "The scan before the last one that measured the agent: its median link bandwidth / that scan's reference",
    labels: ['agent'],
  },
  scanAgentFlagged: { name: 'cmesh_scan_agent_flagged', help: 'Last scan: 1 when the agent was flagged (most of its links slow), else 0', labels: ['agent'] },
  scanLinkBandwidth: {
    name: 'cmesh_scan_link_bandwidth_bytes_per_second',
    help: 'Last scan: sendRecv bandwidth of a pair of agents; flagged links always, every link only up to CMESH_SCAN_LINK_METRICS_MAX_AGENTS agents',
    labels: ['agent_a', 'agent_b', 'flagged'],
  },
  scanLinkRatio: {
    name: 'cmesh_scan_link_bandwidth_ratio',
    help: "Last scan: a pair's bandwidth / the scan's reference (the same links as cmesh_scan_link_bandwidth_bytes_per_second)",
    labels: ['agent_a', 'agent_b', 'flagged'],
  },
  scanReference: { name: 'cmesh_scan_reference_bandwidth_bytes_per_second', help: "Last scan's reference bandwidth (median over agents of their median link bandwidth)", labels: [] },
  scanDuration: { name: 'cmesh_scan_duration_seconds', help: 'Wall time of the last finished scan', labels: [] },
  scanLastTimestamp: { name: 'cmesh_scan_last_timestamp_seconds', help: 'When the last scan finished (Unix time)', labels: [] },
  scanFlaggedAgents: { name: 'cmesh_scan_flagged_agents', help: 'Last scan: agents flagged', labels: [] },
  scanFlaggedLinks: { name: 'cmesh_scan_flagged_links', help: 'Last scan: links flagged on their own (neither end flagged)', labels: [] },
  // collectives as a service (agents, from their member workers): `group` is the group's name, not
  // its round, and each agent labels at most SVC_METRICS_MAX_GROUPS names (the rest: `_other`)
  serviceOpDuration: {
    name: 'cmesh_service_op_duration_seconds',
    help: 'Time of one op of a service group on this agent (from its data being here to its result), by group name, op and dtype',
    labels: ['group', 'op', 'dtype'],
  },
  serviceOpBytes: {
    name: 'cmesh_service_op_bytes_total',
    help: "Bytes of the service group ops that succeeded (nccl-tests' size of each op), by group name, op and dtype",
    labels: ['group', 'op', 'dtype'],
  },
  serviceOpBusBytes: {
    name: 'cmesh_service_op_bus_bytes_total',
    help: "Bytes of the service group ops that succeeded times nccl-tests' bus-bandwidth factor at the group's size: rate() of this over rate() of cmesh_service_op_duration_seconds_sum is the bus bandwidth",
    labels: ['group', 'op', 'dtype'],
  },
  serviceOpErrors: {
    name: 'cmesh_service_op_errors_total',
    help: "Service group ops that failed on this agent, by group name, op and reason (the library's error code)",
    labels: ['group', 'op', 'reason'],
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
