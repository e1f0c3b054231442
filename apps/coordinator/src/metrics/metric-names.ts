// The coordinator's metric catalogue (registered agents, groups, jobs, fabric scans) beside the
// mesh's shared names (@cmesh/protocol's METRICS).
import { METRICS as MESH_METRICS } from '@cmesh/protocol';

const COORDINATOR_METRICS = {
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
    help: 'Last scan: sendRecv bandwidth of a pair of agents, link intra_node (one node) or inter_node; flagged links always, every link only up to CMESH_SCAN_LINK_METRICS_MAX_AGENTS agents',
    labels: ['agent_a', 'agent_b', 'flagged', 'link'],
  },
  scanLinkRatio: {
    name: 'cmesh_scan_link_bandwidth_ratio',
    help: "Last scan: a pair's bandwidth / the reference of its link class (the same links as cmesh_scan_link_bandwidth_bytes_per_second)",
    labels: ['agent_a', 'agent_b', 'flagged', 'link'],
  },
  scanReference: {
    name: 'cmesh_scan_reference_bandwidth_bytes_per_second',
    help: "Last scan's reference bandwidth per link class, intra_node or inter_node (median over agents of their median link bandwidth in that class)",
    labels: ['link'],
  },
  scanDuration: { name: 'cmesh_scan_duration_seconds', help: 'Wall time of the last finished scan', labels: [] },
  scanLastTimestamp: { name: 'cmesh_scan_last_timestamp_seconds', help: 'When the last scan finished (Unix time)', labels: [] },
  scanFlaggedAgents: { name: 'cmesh_scan_flagged_agents', help: 'Last scan: agents flagged', labels: [] },
  scanFlaggedLinks: { name: 'cmesh_scan_flagged_links', help: 'Last scan: links flagged on their own (neither end flagged)', labels: [] },
} as const;

export const METRICS = { ...MESH_METRICS, ...COORDINATOR_METRICS } as const;
