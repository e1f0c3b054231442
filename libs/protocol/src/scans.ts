// Fabric scans: find the slow node or link. A scan measures every pair of agents with a
// point-to-point exchange (sendRecv jobs of 2 agents: latency at a small size, bandwidth at a
// large one), scheduled as a round-robin tournament so every agent is in one pair at a time, then
// a ring all-reduce over all agents and over the two halves; robust statistics (median, MAD) flag
// the agents and links that are slow. Requests: REST `POST /scans`, NATS `<cluster>.scans.run`.
import { z } from 'zod';
import { JobBackendSchema } from './jobs';
import type { ErrorReply } from './reply';
import { ScanGateResultSchema, ScanGateSchema } from './scan-gate';

/** Scan records kept in the scans bucket by default (CMESH_SCANS_KEPT). */
export const DEFAULT_SCANS_KEPT = 50;

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - only (1..64)');

export const ScanRequestSchema = z.object({
  /** agents by id or name (at least 2); default: every live agent that is not running a job */
  agents: z.array(z.string().min(1)).min(2).max(1024).optional(),
  /** the latency probe's message size, bytes */
  latencyBytes: z
    .number()
    .int()
    .positive()
    .max(1 << 20)
    .default(8),
  /** the bandwidth probe's message size, bytes */
  bandwidthBytes: z
    .number()
    .int()
    .positive()
    .max(256 << 20)
    .default(4 << 20),
  /** timed iterations per size and pair (the median is kept) */
  iters: z.number().int().positive().max(1000).default(5),
  warmup: z.number().int().min(0).max(1000).default(1),
  /** ring all-reduce over all agents and over the two halves after the pairs */
  collectives: z.boolean().default(true),
  backend: JobBackendSchema.default('tcp'),
  /** per-call timeout of each pair's transfers, ms */
  timeoutMs: z.number().int().positive().max(600_000).default(60_000),
  /** a link is slow below this fraction of the reference (the median of agents' median bandwidths) */
  slowRatio: z.number().gt(0).lt(1).default(0.6),
  /** thresholds the finished scan must meet (a pre-flight check): the record's `gate` has the verdict */
  gate: ScanGateSchema.optional(),
});
export type ScanRequest = z.infer<typeof ScanRequestSchema>;
export type ScanRequestInput = z.input<typeof ScanRequestSchema>;

export const ScanGetSchema = z.object({ id });
export type ScanGet = z.infer<typeof ScanGetSchema>;

export const SCAN_LIST_MAX = 1000;
export const ScanListSchema = z.object({ limit: z.number().int().positive().max(SCAN_LIST_MAX).default(20) });
export type ScanList = z.infer<typeof ScanListSchema>;

export const SCAN_STATES = ['running', 'succeeded', 'failed', 'cancelled'] as const;
export const ScanStateSchema = z.enum(SCAN_STATES);
export type ScanState = z.infer<typeof ScanStateSchema>;

/**
 * Which kind of path a link takes: `intra_node` when both agents registered the same node
 * (CMESH_NODE_NAME: NVLink/PCIe, shared memory, loopback), `inter_node` otherwise (the network;
 * an agent that named no node is a node of its own). Each class is judged against its own
 * reference: a node's links are not slow for being slower than NVLink.
 */
export const LINK_CLASSES = ['intra_node', 'inter_node'] as const;
export const LinkClassSchema = z.enum(LINK_CLASSES);
export type LinkClass = z.infer<typeof LinkClassSchema>;

/** One pair's measurement (a and b: agent names, a before b in the scan's order). */
export const ScanLinkSchema = z.object({
  a: z.string(),
  b: z.string(),
  round: z.number().int().min(0),
  /** intra_node or inter_node (absent in scans made before agents named their nodes) */
  link: LinkClassSchema.optional(),
  state: z.enum(['pending', 'ok', 'failed', 'skipped']),
  /** sendRecv time at latencyBytes, microseconds (median over iterations, slower rank; the lowest of the samples) */
  latencyUs: z.number().nonnegative().optional(),
  /** sendRecv bandwidth at bandwidthBytes, GB/s (bytes each way / time; the highest of the samples) */
  bandwidthGBs: z.number().nonnegative().optional(),
  /** measurements taken: a link that looked slow is measured again and keeps its best figures */
  samples: z.number().int().min(0).optional(),
  /** bandwidth / the reference of its class (set with the findings) */
  ratio: z.number().nonnegative().optional(),
  slow: z.boolean().optional(),
  /** the job of the first measurement */
  jobId: z.string().optional(),
  reason: z.string().optional(),
});
export type ScanLink = z.infer<typeof ScanLinkSchema>;

/** A ring all-reduce over a set of agents (all, or one half). */
export const ScanCollectiveSchema = z.object({
  name: z.enum(['all', 'half-1', 'half-2']),
  agents: z.array(z.string()),
  state: z.enum(['pending', 'ok', 'failed', 'skipped']),
  bytes: z.number().int().positive(),
  busBwGBs: z.number().nonnegative().optional(),
  timeUs: z.number().nonnegative().optional(),
  jobId: z.string().optional(),
  reason: z.string().optional(),
});
export type ScanCollective = z.infer<typeof ScanCollectiveSchema>;

export const ScanAgentFindingSchema = z.object({
  agent: z.string(),
  /** median bandwidth of its links, GB/s */
  medianBandwidthGBs: z.number().nonnegative().nullable(),
  /** its median bandwidth / the reference */
  ratio: z.number().nonnegative().nullable(),
  /** median latency of its links, microseconds */
  medianLatencyUs: z.number().nonnegative().nullable(),
  links: z.number().int().min(0),
  slowLinks: z.number().int().min(0),
  flagged: z.boolean(),
  /**
   * in the findings of a scan over both classes: the class its bandwidth, ratio and latency are
   * of (the one where its ratio is lowest); links and slowLinks count both
   */
  link: LinkClassSchema.optional(),
});
export type ScanAgentFinding = z.infer<typeof ScanAgentFindingSchema>;

const findingsFields = {
  /** the median over agents of each agent's median link bandwidth, GB/s */
  referenceGBs: z.number().nonnegative().nullable(),
  /** 1.4826 x the median absolute deviation of the agents' medians, GB/s (a robust sigma) */
  spreadGBs: z.number().nonnegative().nullable(),
  agents: z.array(ScanAgentFindingSchema),
  flaggedAgents: z.array(z.string()),
  flaggedLinks: z.array(z.object({ a: z.string(), b: z.string(), ratio: z.number().nonnegative(), link: LinkClassSchema.optional() })),
  /** one sentence per flagged agent or link: "agent-7: 0.41x median bandwidth on 6 of 7 links" */
  evidence: z.array(z.string()),
  verdict: z.string(),
};

/** The findings over the links of one class (intra_node or inter_node) alone. */
export const ScanClassFindingsSchema = z.object({
  link: LinkClassSchema,
  /** links of the class, and how many were measured (ok or failed) */
  links: z.number().int().min(0),
  measured: z.number().int().min(0),
  /** the median latency of its measured links, microseconds */
  medianLatencyUs: z.number().nonnegative().nullable(),
  ...findingsFields,
});
export type ScanClassFindings = z.infer<typeof ScanClassFindingsSchema>;

/**
 * A scan's findings. Over links of one class they are that class's; over both, each class is
 * judged on its own (`byLink`), and the top level merges them: flagged agents and links of
 * either class, evidence and verdict prefixed with the class, and the reference and spread of the
 * inter-node links (the fabric).
 */
export const ScanFindingsSchema = z.object({
  ...findingsFields,
  /** each class present, judged against its own reference (absent in scans made before agents named their nodes) */
  byLink: z.array(ScanClassFindingsSchema).optional(),
});
export type ScanFindings = z.infer<typeof ScanFindingsSchema>;

export const ScanRecordSchema = z.object({
  id,
  state: ScanStateSchema,
  /** who asked: a request (REST, NATS, cmesh scan) or the coordinator's schedule (--scan-every) */
  trigger: z.enum(['request', 'schedule']),
  request: ScanRequestSchema,
  /** agent names in the scan's order (node by node) */
  agents: z.array(z.string()),
  /** agent name -> the node it registered (agents that named none are left out) */
  nodes: z.record(z.string(), z.string()).optional(),
  rounds: z.number().int().min(0),
  progress: z.object({ done: z.number().int(), total: z.number().int() }),
  links: z.array(ScanLinkSchema),
  collectives: z.array(ScanCollectiveSchema),
  findings: ScanFindingsSchema.optional(),
  reason: z.string().optional(),
  replica: z.string().optional(),
  createdAt: z.string(),
  finishedAt: z.string().optional(),
  /** wall time of the scan, ms */
  wallMs: z.number().nonnegative().optional(),
  /** the verdict of the request's gate once the scan ended (only when it asked for one) */
  gate: ScanGateResultSchema.optional(),
});
export type ScanRecord = z.infer<typeof ScanRecordSchema>;

export type ScanReply = { ok: true; scan: ScanRecord } | ErrorReply;
export type ScanListReply = { ok: true; scans: ScanRecord[] } | ErrorReply;
