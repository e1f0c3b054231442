// The live flight recorder: the coordinator asks every rank on `<cluster>.trace.collect` (one
// request, many replies) and each rank answers with its recorder's summary, the library's
// TraceDump (torch's field names). The analysis of the answers is the library's analyzeTraces.
import { z } from 'zod';

/** How long the coordinator gathers answers by default, and at most (the "within 2 s"). */
export const TRACE_COLLECT_DEFAULT_MS = 1000;
export const TRACE_COLLECT_MAX_MS = 5000;

/**
 * The request's body: every rank answers, or only the ranks of one job (a run id, a job id).
 * `nonce`: random per request; a rank with a secret signs it with its answer (TRACE_MAC_HEADER).
 */
export const TraceCollectSchema = z.object({ job: z.string().min(1).max(256).optional(), nonce: z.string().max(64).optional() });
export type TraceCollect = z.infer<typeof TraceCollectSchema>;

const ns = z.number().finite();
const nsOrNull = ns.nullable();
const sizes = z.array(z.array(z.number().int().min(0)).max(8)).max(64);
const dtypes = z.array(z.string().max(32)).max(64);

export const TraceEntrySchema = z.object({
  record_id: z.number().int().min(0),
  pg_id: z.number().int().min(0),
  process_group: z.tuple([z.string().max(128), z.string().max(128)]),
  collective_seq_id: z.number().int().min(-1),
  p2p_seq_id: z.number().int().min(-1),
  profiling_name: z.string().max(128),
  op: z.string().max(64),
  algorithm: z.string().max(64),
  input_sizes: sizes,
  input_dtypes: dtypes,
  output_sizes: sizes,
  output_dtypes: dtypes,
  state: z.enum(['scheduled', 'started', 'completed', 'failed']),
  time_created_ns: ns,
  time_discovered_started_ns: nsOrNull,
  time_discovered_completed_ns: nsOrNull,
  duration_ms: nsOrNull,
  retired: z.boolean(),
  timeout_ms: z.number().min(0),
  is_p2p: z.boolean(),
  peer: z.number().int().min(-1).nullable(),
  error: z.string().max(64).nullable(),
});

/** process groups in one dump at most (a real world has a few; the analysis walks each) */
export const TRACE_MAX_GROUPS = 1024;
/** members of all the process groups of one dump at most (each becomes a line of the analysis) */
export const TRACE_MAX_MEMBERS = 65536;
const fewKeys = (r: Record<string, unknown>) => Object.keys(r).length <= TRACE_MAX_GROUPS;
const fewMembers = (r: Record<string, { ranks: unknown[] }>) => Object.values(r).reduce((n, g) => n + g.ranks.length, 0) <= TRACE_MAX_MEMBERS;

export const TraceDumpSchema = z.object({
  version: z.string().max(16),
  rank: z.number().int().min(0),
  world_size: z.number().int().min(1),
  pid: z.number().int(),
  host: z.string().max(256),
  job: z.string().max(256).optional(),
  time_ns: ns,
  pg_config: z
    .record(
      z.string().max(16),
      z.object({ name: z.string().max(128), desc: z.string().max(128), ranks: z.array(z.number().int().min(0)).max(65536), backend: z.string().max(32) }),
    )
    .refine(fewKeys, `at most ${TRACE_MAX_GROUPS} process groups`)
    .refine(fewMembers, `at most ${TRACE_MAX_MEMBERS} members in all the process groups`),
  pg_status: z
    .record(
      z.string().max(16),
      z.object({
        last_enqueued_collective: z.number().int(),
        last_started_collective: z.number().int(),
        last_completed_collective: z.number().int(),
        last_completed_op: z.string().max(64),
      }),
    )
    .refine(fewKeys, `at most ${TRACE_MAX_GROUPS} process groups`),
  entries: z.array(TraceEntrySchema).max(100_000),
});

const OpViewSchema = z.object({
  op: z.string(),
  pg: z.string(),
  seq: z.number(),
  p2p: z.boolean(),
  peer: z.number().nullable(),
  dtype: z.string().nullable(),
  count: z.number().nullable(),
  since_ns: z.number(),
  error: z.string().nullable(),
});

/** The library's GroupReport: one process group of one job, as analyzeTraces says it. */
export const GroupReportSchema = z.object({
  job: z.string().optional(),
  /** false: nobody could check these answers (no secret of the job here), anyone may have made them up */
  verified: z.boolean().optional(),
  pg: z.string(),
  ranks: z.array(z.number()),
  seq: z.number().optional(),
  op: z.string().optional(),
  waiting: z.array(z.number()),
  since_ns: z.number().optional(),
  age_s: z.number(),
  lagging: z.array(
    z.object({
      rank: z.number(),
      answered: z.boolean(),
      last_completed: z.number(),
      last_completed_op: z.string(),
      current: OpViewSchema.nullable(),
      elsewhere: OpViewSchema.nullable(),
      mismatch: z.boolean(),
    }),
  ),
  stuck: z.boolean(),
  lines: z.array(z.string()),
  text: z.string(),
});

/** GET /traces, GET /groups/{id}/trace: the reports, and how many ranks answered in how long. */
export const TraceReportSchema = z.object({
  reports: z.array(GroupReportSchema),
  answered: z.number().int().min(0),
  waitedMs: z.number().min(0),
  /** answers dropped: for a job whose secret is known here, without a MAC or with a wrong one */
  rejected: z.number().int().min(0).optional(),
});
export type TraceReport = z.infer<typeof TraceReportSchema>;

/** Query of GET /traces (and GET /groups/{id}/trace): gather answers for at most `waitMs`. */
export const TraceQuerySchema = z.object({
  job: z.string().min(1).max(256).optional(),
  waitMs: z.coerce.number().int().min(50).max(TRACE_COLLECT_MAX_MS).optional(),
});
export const GroupTraceQuerySchema = z.object({
  id: z.string().min(1).max(256),
  waitMs: z.coerce.number().int().min(50).max(TRACE_COLLECT_MAX_MS).optional(),
});
