// Generates dashboards/grafana/dashboards/cmesh-overview.json (run from the repo root:
// `node -r @swc-node/register dashboards/grafana/generate-dashboard.ts`). The test in
// test/observability checks the JSON is up to date and runs every expression against Prometheus.
//
// Nothing about the installation is fixed: the data source is the `datasource` variable, and the
// coordinator's and the agents' scrape jobs are found by their cmesh_component_info series (any
// job names), within the `cluster` picked (every cmesh series carries its cluster label).
import { writeFileSync } from 'fs';
import { join } from 'path';

const DS = { type: 'prometheus', uid: '${datasource}' };

interface Target {
  expr: string;
  legend: string;
}
interface PanelSpec {
  title: string;
  description: string;
  type: 'timeseries' | 'bargauge' | 'stat';
  unit: string;
  targets: Target[];
}

const rows: { title: string; panels: PanelSpec[] }[] = [
  {
    title: 'Bandwidth',
    panels: [
      {
        title: 'Bus bandwidth by op and size class (last sweep)',
        description:
          "The coordinator's nccl-tests busbw of the last sweep: per iteration the slowest rank, median over iterations; one bar per power-of-two size class (the sweep's largest size in it).",
        type: 'bargauge',
        unit: 'Bps',
        targets: [
          {
            expr: 'max by (op, size_class) (cmesh_collective_busbw_bytes_per_second{cluster=~"$cluster", job=~"$coordinator_job", op=~"$op"})',
            legend: '{{op}} <= {{size_class}} B',
          },
        ],
      },
      {
        title: 'Algorithm bandwidth by op and size class (last sweep)',
        description: 'size / time of the last sweep, as nccl-tests reports algbw.',
        type: 'bargauge',
        unit: 'Bps',
        targets: [
          {
            expr: 'max by (op, size_class) (cmesh_collective_algbw_bytes_per_second{cluster=~"$cluster", job=~"$coordinator_job", op=~"$op"})',
            legend: '{{op}} <= {{size_class}} B',
          },
        ],
      },
      {
        title: "Each rank's own busbw (last sweep)",
        description: "Every agent's busbw from its own median time: the slow rank stands out.",
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          {
            expr: 'max by (instance, op) (cmesh_collective_busbw_bytes_per_second{cluster=~"$cluster", job=~"$agent_job", op=~"$op"})',
            legend: '{{instance}} {{op}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Latency',
    panels: [
      {
        title: 'Collective latency p50 / p90 / p99',
        description:
          'Quantiles of cmesh_collective_duration_seconds by source, op and size bucket: agents observe every timed iteration, library jobs every call, the coordinator one median per row, so sources are kept apart.',
        type: 'timeseries',
        unit: 's',
        targets: [0.5, 0.9, 0.99].map((q) => ({
          expr: `histogram_quantile(${q}, sum by (le, job, op, size_bucket) (rate(cmesh_collective_duration_seconds_bucket{cluster=~"$cluster", op=~"$op"}[$__rate_interval])))`,
          legend: `p${q * 100} {{job}} {{op}} <= {{size_bucket}} B`,
        })),
      },
      {
        title: 'Collective calls per second',
        description: 'Timed collective calls (sweep iterations on agents, every call in library jobs).',
        type: 'timeseries',
        unit: 'ops',
        targets: [
          {
            expr: 'sum by (job, op) (rate(cmesh_collective_duration_seconds_count{cluster=~"$cluster", op=~"$op"}[$__rate_interval]))',
            legend: '{{job}} {{op}}',
          },
        ],
      },
      {
        title: 'Rendezvous duration p50 / mean (since start)',
        description: 'From the first join to the close of a c10d rendezvous round at the coordinator.',
        type: 'stat',
        unit: 's',
        targets: [
          { expr: 'histogram_quantile(0.5, sum by (le) (cmesh_rendezvous_duration_seconds_bucket{cluster=~"$cluster"}))', legend: 'p50' },
          {
            expr: 'sum(cmesh_rendezvous_duration_seconds_sum{cluster=~"$cluster"}) / sum(cmesh_rendezvous_duration_seconds_count{cluster=~"$cluster"})',
            legend: 'mean',
          },
        ],
      },
    ],
  },
  {
    title: 'Errors',
    panels: [
      {
        title: 'Errors by op and reason',
        description: 'Failed collectives (library jobs) and failed job runs (agents, coordinator).',
        type: 'timeseries',
        unit: 'ops',
        targets: [
          {
            expr: 'sum by (job, op, reason) (rate(cmesh_collective_errors_total{cluster=~"$cluster"}[$__rate_interval]))',
            legend: '{{job}} {{op}} {{reason}}',
          },
        ],
      },
      {
        title: 'Wrong elements (verification)',
        description: 'Elements that failed the nccl-tests style check, summed over sweeps.',
        type: 'stat',
        unit: 'short',
        targets: [{ expr: 'sum by (op) (cmesh_collective_wrong_elements_total{cluster=~"$cluster", job=~"$coordinator_job"})', legend: '{{op}}' }],
      },
      {
        title: 'Jobs finished by state',
        description: 'Sweeps run through the mesh, by their final state.',
        type: 'stat',
        unit: 'short',
        targets: [{ expr: 'sum by (state) (cmesh_jobs_total{cluster=~"$cluster"})', legend: '{{state}}' }],
      },
    ],
  },
  {
    title: 'Cluster',
    panels: [
      {
        title: 'Agents by state',
        description: 'Registered rank agents: ready, busy or lost.',
        type: 'timeseries',
        unit: 'short',
        targets: [{ expr: 'max by (state) (cmesh_agents{cluster=~"$cluster"})', legend: '{{state}}' }],
      },
      {
        title: 'Heartbeat gaps',
        description: 'Seconds since the coordinator last heard from each agent.',
        type: 'timeseries',
        unit: 's',
        targets: [{ expr: 'max by (agent) (cmesh_agent_heartbeat_gap_seconds{cluster=~"$cluster"})', legend: '{{agent}}' }],
      },
      {
        title: 'Process groups',
        description: 'Groups allocated by the coordinator (max over replicas: each exports the shared KV state).',
        type: 'stat',
        unit: 'short',
        targets: [{ expr: 'max(cmesh_groups{cluster=~"$cluster"})', legend: 'groups' }],
      },
      {
        title: 'Targets up',
        description: 'Scrape health of every cmesh exporter.',
        type: 'stat',
        unit: 'short',
        targets: [{ expr: 'sum by (job) (up{job=~"$coordinator_job|$agent_job"})', legend: '{{job}}' }],
      },
    ],
  },
  {
    title: 'Fabric scans',
    panels: [
      {
        title: "Last scan: each link's bandwidth / reference",
        description:
          "The last scan's pairwise matrix, one bar per link (agent_a<->agent_b): sendRecv bandwidth over the reference of its class, intra_node (both agents on one node) or inter_node (the median of the agents' median bandwidths in that class). Every link up to CMESH_SCAN_LINK_METRICS_MAX_AGENTS agents, only flagged links above. cmesh scan --show <id> prints the whole matrix.",
        type: 'bargauge',
        unit: 'percentunit',
        targets: [
          {
            expr: 'max by (agent_a, agent_b, flagged, link) (cmesh_scan_link_bandwidth_ratio{cluster=~"$cluster", job=~"$coordinator_job"})',
            legend: '{{agent_a}}<->{{agent_b}} {{link}} flagged={{flagged}}',
          },
        ],
      },
      {
        title: 'Scan reference bandwidth per link class',
        description:
          "Each scan's reference, per link class: intra_node (agents of one node: NVLink/PCIe, shared memory) and inter_node (the network). A drop in one class with the other steady points at that kind of path.",
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          { expr: 'max by (link) (cmesh_scan_reference_bandwidth_bytes_per_second{cluster=~"$cluster", job=~"$coordinator_job"})', legend: '{{link}}' },
        ],
      },
      {
        title: "Agents' median bandwidth / reference, per scan",
        description: "Each agent's median link bandwidth over the scan's reference; the CmeshAgentSlowInScans alert fires below 0.5 in 2 consecutive scans.",
        type: 'timeseries',
        unit: 'percentunit',
        targets: [{ expr: 'max by (agent) (cmesh_scan_agent_bandwidth_ratio{cluster=~"$cluster", job=~"$coordinator_job"})', legend: '{{agent}}' }],
      },
      {
        title: 'Flagged agents over time',
        description: '1 while the last scan flags the agent (most of its links slow).',
        type: 'timeseries',
        unit: 'short',
        targets: [{ expr: 'max by (agent) (cmesh_scan_agent_flagged{cluster=~"$cluster", job=~"$coordinator_job"})', legend: '{{agent}}' }],
      },
      {
        title: 'Last scan',
        description: 'What the last scan flagged, and its wall time.',
        type: 'stat',
        unit: 'short',
        targets: [
          { expr: 'max(cmesh_scan_flagged_agents{cluster=~"$cluster", job=~"$coordinator_job"})', legend: 'flagged agents' },
          { expr: 'max(cmesh_scan_flagged_links{cluster=~"$cluster", job=~"$coordinator_job"})', legend: 'flagged links' },
          { expr: 'max(cmesh_scan_duration_seconds{cluster=~"$cluster", job=~"$coordinator_job"})', legend: 'wall time, s' },
        ],
      },
    ],
  },
  {
    title: 'Collectives as a service',
    panels: [
      {
        title: 'Service op latency p50 / p99 by group and op',
        description:
          "Time of each service group op on the agents (its data there to its result), by group name (not round; at most 32 names per agent, the rest as _other) and op. GET /service-groups/{name} shows each rank's op in flight.",
        type: 'timeseries',
        unit: 's',
        targets: [0.5, 0.99].map((q) => ({
          expr: `histogram_quantile(${q}, sum by (le, group, op) (rate(cmesh_service_op_duration_seconds_bucket{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval])))`,
          legend: `p${q * 100} {{group}} {{op}}`,
        })),
      },
      {
        title: 'Service bus bandwidth by group and op',
        description:
          "nccl-tests' busbw of the service ops, averaged over the members' agents: bus bytes (size × the op's bus factor at the group's size) over the time the ops took.",
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          {
            expr: 'sum by (group, op) (rate(cmesh_service_op_bus_bytes_total{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval])) / sum by (group, op) (rate(cmesh_service_op_duration_seconds_sum{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval]))',
            legend: '{{group}} {{op}}',
          },
        ],
      },
      {
        title: 'Service tensor bytes per second by group',
        description: "Tensor bytes of the service ops that succeeded (nccl-tests' size), summed over the members' agents.",
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          {
            expr: 'sum by (group) (rate(cmesh_service_op_bytes_total{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval]))',
            legend: '{{group}}',
          },
        ],
      },
      {
        title: 'Service ops and failures per second',
        description:
          'Ops that succeeded, by group and op, and ops that failed, by group, op and reason (the library error code: PEER_FAILURE, TIMEOUT, COLLECTIVE_MISMATCH, …). A failure ends the group.',
        type: 'timeseries',
        unit: 'ops',
        targets: [
          {
            expr: 'sum by (group, op) (rate(cmesh_service_op_duration_seconds_count{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval]))',
            legend: '{{group}} {{op}}',
          },
          {
            expr: 'sum by (group, op, reason) (rate(cmesh_service_op_errors_total{cluster=~"$cluster", job=~"$agent_job", op=~"$op"}[$__rate_interval]))',
            legend: 'failed {{group}} {{op}} {{reason}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Per rank',
    panels: [
      {
        title: 'Per-rank data-plane bytes (library jobs)',
        description: 'Bytes each rank of a cmesh run job sent and received (CMESH_METRICS_PORT).',
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          {
            expr: 'sum by (instance, direction) (rate(cmesh_collective_bytes_total{cluster=~"$cluster", op=~"$op"}[$__rate_interval]))',
            legend: '{{instance}} {{direction}}',
          },
        ],
      },
      {
        title: 'Per-rank tensor bytes',
        description: 'Bytes of the tensors each rank ran collectives on (agents and library jobs).',
        type: 'timeseries',
        unit: 'Bps',
        targets: [
          {
            expr: 'sum by (job, instance) (rate(cmesh_collective_payload_bytes_total{cluster=~"$cluster", op=~"$op"}[$__rate_interval]))',
            legend: '{{job}} {{instance}}',
          },
        ],
      },
      {
        title: 'Resident memory',
        description: 'Default process metrics of every cmesh process.',
        type: 'timeseries',
        unit: 'bytes',
        targets: [{ expr: 'process_resident_memory_bytes{cluster=~"$cluster", job=~"$coordinator_job|$agent_job"}', legend: '{{job}} {{instance}}' }],
      },
    ],
  },
];

/** A query variable of the data source, every value selectable, "All" by default. */
function queryVariable(name: string, label: string, definition: string, allValue?: string): object {
  return {
    name,
    label,
    type: 'query',
    datasource: DS,
    query: { query: definition, refId: name },
    definition,
    includeAll: true,
    multi: true,
    ...(allValue === undefined ? {} : { allValue }),
    current: { text: 'All', value: '$__all' },
    refresh: 2,
    sort: 1,
  };
}

function build(): object {
  const panels: object[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows) {
    panels.push({ id: id++, type: 'row', title: row.title, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y: y++ }, panels: [] });
    const w = Math.floor(24 / row.panels.length);
    row.panels.forEach((p, i) => {
      panels.push({
        id: id++,
        type: p.type,
        title: p.title,
        description: p.description,
        datasource: DS,
        gridPos: { h: 8, w, x: i * w, y },
        fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
        options: p.type === 'bargauge' ? { orientation: 'horizontal', displayMode: 'gradient', reduceOptions: { calcs: ['lastNotNull'], values: false } } : {},
        targets: p.targets.map((t, k) => ({ refId: String.fromCharCode(65 + k), datasource: DS, expr: t.expr, legendFormat: t.legend })),
      });
    });
    y += 8;
  }
  return {
    uid: 'cmesh-overview',
    title: 'cmesh: collectives',
    tags: ['cmesh'],
    timezone: 'browser',
    schemaVersion: 39,
    version: 1,
    editable: false,
    refresh: '10s',
    time: { from: 'now-30m', to: 'now' },
    templating: {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0, refresh: 1 },
        queryVariable('cluster', 'cluster', 'label_values(cmesh_component_info, cluster)', '.*'),
        // all the jobs found, as a regex alternation (no allValue: "All" must not match other jobs)
        queryVariable('coordinator_job', 'coordinator job', 'label_values(cmesh_component_info{cluster=~"$cluster", component="coordinator"}, job)'),
        queryVariable('agent_job', 'agent job', 'label_values(cmesh_component_info{cluster=~"$cluster", component="agent"}, job)'),
        queryVariable('op', 'op', 'label_values(cmesh_collective_duration_seconds_count{cluster=~"$cluster"}, op)', '.*'),
      ],
    },
    annotations: { list: [] },
    panels,
  };
}

export const DASHBOARD_PATH = join(__dirname, 'dashboards', 'cmesh-overview.json');
export const dashboardJson = (): string => JSON.stringify(build(), null, 2) + '\n';

if (require.main === module) writeFileSync(DASHBOARD_PATH, dashboardJson());
