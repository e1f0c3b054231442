// The mesh's metric names: the library's (its exporter's and the sweeps' collective series) and
// those the coordinator and the agents both serve or the agents serve for service groups. The
// coordinator's own catalogue (agents, jobs, scans) is the coordinator's.
import { COLLECTIVE_METRICS } from '@cmesh/collectives/metrics';

export { COLLECTIVE_METRICS, DURATION_BUCKETS, MAX_SIZE_CLASS, sizeBucket, sizeClass, opLabel } from '@cmesh/collectives/metrics';

export const METRICS = {
  ...COLLECTIVE_METRICS,
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
  // collectives as a service (agents, from their member workers): `group` is the group's name, not
  // its round, and each agent labels at most SERVICE_GROUP_METRICS_MAX_GROUPS names (the rest: `_other`)
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
