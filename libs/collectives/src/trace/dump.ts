// The recorder's dump: torch's flight recorder layout and field names (pg_config, pg_status,
// entries with record_id, pg_id, collective_seq_id, profiling_name, input_sizes, state,
// time_created_ns, ...), plus what cmesh knows besides (algorithm, peer, error, the rank, the job).
// One JSON file per rank: <dir>/cmesh_trace_rank_<rank>.json.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { InvalidArgumentError } from '../errors';
import { FlightRecorder, GroupTrace, TraceRecord, TraceState, toEpochNs } from './recorder';

export const TRACE_DUMP_VERSION = '1';
export const TRACE_DUMP_DIR_ENV = 'CMESH_TRACE_DUMP_DIR';

export interface TraceEntry {
  record_id: number;
  pg_id: number;
  /** torch: [name, description] */
  process_group: [string, string];
  /** -1 for point-to-point ops */
  collective_seq_id: number;
  /** -1 for collectives */
  p2p_seq_id: number;
  /** torch: "nccl:all_reduce"; here "<backend>:<op>" in the library's names ("tcp:allReduce") */
  profiling_name: string;
  op: string;
  algorithm: string;
  input_sizes: number[][];
  input_dtypes: string[];
  output_sizes: number[][];
  output_dtypes: string[];
  state: TraceState;
  time_created_ns: number;
  time_discovered_started_ns: number | null;
  time_discovered_completed_ns: number | null;
  duration_ms: number | null;
  retired: boolean;
  timeout_ms: number;
  is_p2p: boolean;
  /** p2p: the other world rank (-1: any source); collectives: null (every member of the group) */
  peer: number | null;
  /** the error code of a failed op (TIMEOUT, PEER_FAILURE, COLLECTIVE_MISMATCH, ...) */
  error: string | null;
}

export interface PgConfig {
  name: string;
  desc: string;
  /** world ranks of the members, in group-rank order */
  ranks: number[];
  backend: string;
}

/** torch's pg_status, seq ids as in entries (-1: none yet) */
export interface PgStatus {
  last_enqueued_collective: number;
  last_started_collective: number;
  last_completed_collective: number;
  /** the op of last_completed_collective ('' when none) */
  last_completed_op: string;
}

export interface TraceDump {
  version: string;
  /** world rank and size of the process that wrote it */
  rank: number;
  world_size: number;
  pid: number;
  host: string;
  /** the run it belongs to (TORCHELASTIC_RUN_ID / CMESH_RUN_ID, an agent job's id) when known */
  job?: string;
  /** when the dump was taken */
  time_ns: number;
  pg_config: Record<string, PgConfig>;
  pg_status: Record<string, PgStatus>;
  entries: TraceEntry[];
}

export interface DumpMeta {
  rank: number;
  worldSize: number;
  job?: string;
  groups: readonly GroupTrace[];
}

function traceEntry(r: TraceRecord): TraceEntry {
  const done = r.state === 'completed' || r.state === 'failed';
  const size = [r.count];
  return {
    record_id: r.recordId,
    pg_id: r.group.pgId,
    process_group: [String(r.group.pgId), r.group.pgId === 0 ? 'default_pg' : 'new_group'],
    collective_seq_id: r.seq,
    p2p_seq_id: r.p2pSeq,
    profiling_name: `${r.group.backend}:${r.op}`,
    op: r.op,
    algorithm: r.algorithm,
    input_sizes: r.op === 'recv' || r.op === 'barrier' ? [] : [size],
    input_dtypes: r.op === 'recv' || r.op === 'barrier' ? [] : [r.dtype],
    output_sizes: r.op === 'send' || r.op === 'barrier' ? [] : [size],
    output_dtypes: r.op === 'send' || r.op === 'barrier' ? [] : [r.dtype],
    state: r.state,
    time_created_ns: toEpochNs(r.created),
    time_discovered_started_ns: r.state === 'scheduled' ? null : toEpochNs(r.started),
    time_discovered_completed_ns: done ? toEpochNs(r.completed) : null,
    duration_ms: done ? r.completed - r.started : null,
    retired: done,
    timeout_ms: r.timeoutMs,
    is_p2p: r.seq < 0,
    peer: r.seq < 0 ? r.peer : null,
    error: r.error ?? null,
  };
}

function groupTables(groups: readonly GroupTrace[]): Pick<TraceDump, 'pg_config' | 'pg_status'> {
  const pg_config: Record<string, PgConfig> = {};
  const pg_status: Record<string, PgStatus> = {};
  for (const g of groups) {
    pg_config[g.pgId] = { name: String(g.pgId), desc: g.pgId === 0 ? 'default_pg' : 'new_group', ranks: [...g.ranks], backend: g.backend };
    pg_status[g.pgId] = {
      last_enqueued_collective: g.lastEnqueued,
      last_started_collective: g.lastStarted,
      last_completed_collective: g.lastCompleted,
      last_completed_op: g.lastCompletedOp,
    };
  }
  return { pg_config, pg_status };
}

function header(meta: DumpMeta): Omit<TraceDump, 'pg_config' | 'pg_status' | 'entries'> {
  return {
    version: TRACE_DUMP_VERSION,
    rank: meta.rank,
    world_size: meta.worldSize,
    pid: process.pid,
    host: os.hostname(),
    ...(meta.job ? { job: meta.job } : {}),
    time_ns: toEpochNs(performance.now()),
  };
}

/** Every kept entry, oldest first, and every op still in flight (even one the ring has dropped). */
export function buildDump(recorder: FlightRecorder, meta: DumpMeta): TraceDump {
  // this world's groups only: a process that initialized again (an agent's job worker, a restart
  // in place) keeps the earlier world's records in the ring, whose group ids are reused
  const ours = new Set(meta.groups);
  const kept = recorder.records().filter((r) => ours.has(r.group));
  const seen = new Set(kept);
  const lost = recorder.inFlight().filter((r) => ours.has(r.group) && !seen.has(r));
  return { ...header(meta), ...groupTables(meta.groups), entries: [...lost, ...kept].map(traceEntry) };
}

/**
 * What a rank tells its peers and the coordinator: the same shape with only the ops in flight and
 * the last finished op of each group (a few hundred bytes, whatever the buffer's size).
 */
export function buildSummary(recorder: FlightRecorder, meta: DumpMeta, recent = 4): TraceDump {
  const ours = new Set(meta.groups);
  const picked = new Set<TraceRecord>(recorder.inFlight().filter((r) => ours.has(r.group)));
  const kept = recorder.records();
  for (const g of meta.groups) {
    let n = 0;
    for (let i = kept.length - 1; i >= 0 && n < recent; i--) {
      if (kept[i].group === g) {
        picked.add(kept[i]);
        n++;
      }
    }
  }
  const entries = [...picked].sort((a, b) => a.recordId - b.recordId).map(traceEntry);
  return { ...header(meta), ...groupTables(meta.groups), entries };
}

export function dumpFileName(rank: number): string {
  return `cmesh_trace_rank_${rank}.json`;
}

/** Writes the dump (through a temporary file, so a reader never sees half of one); returns its path. */
export function writeDump(dump: TraceDump, dir: string): string {
  if (typeof dir !== 'string' || !dir) throw new InvalidArgumentError(`trace dump: a directory is needed (${TRACE_DUMP_DIR_ENV}), got ${JSON.stringify(dir)}`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, dumpFileName(dump.rank));
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(dump));
  fs.renameSync(tmp, file);
  return file;
}

/** Reads every cmesh_trace_rank_<r>.json of a directory (torch's analyzer reads a folder likewise). */
export function readDumps(dir: string): TraceDump[] {
  const files = fs.readdirSync(dir).filter((f) => /^cmesh_trace_rank_\d+\.json$/.test(f));
  return files.map((f) => {
    const d = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as TraceDump;
    if (typeof d !== 'object' || d === null || typeof d.rank !== 'number' || !Array.isArray(d.entries) || typeof d.pg_config !== 'object') {
      throw new InvalidArgumentError(`${path.join(dir, f)}: not a cmesh flight recorder dump (rank, pg_config, entries expected)`);
    }
    return d;
  });
}
