// Flight recorder answers an attacker sends (anyone allowed to answer requests can answer
// `trace.collect`): well-formed dumps that name a rank as stuck, and hostile or malformed ones,
// for the security and fuzz tests of the coordinator's collection.
import fc from 'fast-check';
import { invalidJsonPayload } from './fuzz';

export interface ForgedDumpOptions {
  /** the job it claims (none: a rank of no job) */
  job?: string;
  rank: number;
  worldSize: number;
  /** the collective it says the rank is in; the one before it is its last completed */
  seq: number;
  /** the group's members (default 0..worldSize-1) */
  ranks?: number[];
  host?: string;
}

/** A summary in the library's TraceDump shape saying `rank` waits in allReduce #seq. */
export function forgedTraceDump(o: ForgedDumpOptions): Record<string, unknown> {
  const now = Date.now() * 1e6;
  const ranks = o.ranks ?? Array.from({ length: o.worldSize }, (_, i) => i);
  return {
    version: '1',
    rank: o.rank,
    world_size: o.worldSize,
    pid: 4242,
    host: o.host ?? 'forged-host',
    ...(o.job !== undefined ? { job: o.job } : {}),
    time_ns: now,
    pg_config: { 0: { name: '0', desc: 'default_pg', ranks, backend: 'tcp' } },
    pg_status: { 0: { last_enqueued_collective: o.seq, last_started_collective: o.seq, last_completed_collective: o.seq - 1, last_completed_op: 'allReduce' } },
    entries: [
      {
        record_id: o.seq,
        pg_id: 0,
        process_group: ['0', 'default_pg'],
        collective_seq_id: o.seq,
        p2p_seq_id: -1,
        profiling_name: 'tcp:allReduce',
        op: 'allReduce',
        algorithm: 'ring',
        input_sizes: [[1024]],
        input_dtypes: ['float32'],
        output_sizes: [[1024]],
        output_dtypes: ['float32'],
        state: 'started',
        time_created_ns: now - 60e9,
        time_discovered_started_ns: now - 60e9,
        time_discovered_completed_ns: null,
        duration_ms: null,
        retired: false,
        timeout_ms: 60000,
        is_p2p: false,
        peer: null,
        error: null,
      },
    ],
  };
}

export interface ForgedAnswer {
  what: string;
  data: Uint8Array;
  /** the Cmesh-Trace-Mac header to send, if any */
  mac?: string;
}

const enc = new TextEncoder();

/**
 * Answers to a trace request: well-formed hostile dumps (claiming one of `jobs` or another job,
 * ranks and world sizes up to the schema's bounds, many groups, huge sequence numbers, strings at
 * their limits, with no MAC, a garbled one or a long one) and malformed ones (random bytes, not
 * JSON, truncated, mistyped, deeply nested, large).
 */
export function forgedTraceAnswer(jobs: readonly string[]): fc.Arbitrary<ForgedAnswer> {
  const valid = forgedTraceDump({ job: jobs[0], rank: 1, worldSize: 2, seq: 5 });
  const job = fc.oneof(fc.constantFrom(...jobs), fc.constant(undefined), fc.string({ maxLength: 256 }));
  const mac = fc.oneof(fc.constant(undefined), fc.base64String({ maxLength: 44 }), fc.string({ maxLength: 80 }), fc.constant('A'.repeat(43)));
  const hostile = fc
    .record({
      job,
      rank: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 ** 31 })),
      worldSize: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 65536 })),
      seq: fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constant(Number.MAX_SAFE_INTEGER), fc.constant(2 ** 31)),
      groups: fc.oneof({ arbitrary: fc.constant(1), weight: 9 }, { arbitrary: fc.integer({ min: 1, max: 1024 }), weight: 1 }),
      members: fc.oneof({ arbitrary: fc.integer({ min: 1, max: 64 }), weight: 9 }, { arbitrary: fc.integer({ min: 1, max: 65536 }), weight: 1 }),
      host: fc.oneof(fc.constant('h'), fc.string({ unit: 'binary', maxLength: 256 })),
      mac,
    })
    .map(({ job, rank, worldSize, seq, groups, members, host, mac }) => {
      // at most 65536 members in all (the schema's bound), so that the dump fits in a message
      const size = Math.min(members, worldSize, Math.floor(65536 / groups));
      const d = forgedTraceDump({ job, rank, worldSize, seq, host, ranks: Array.from({ length: size }, (_, i) => i) });
      if (groups > 1) {
        const cfg = d.pg_config as Record<string, unknown>;
        const st = d.pg_status as Record<string, unknown>;
        for (let g = 1; g < groups; g++) {
          cfg[g] = cfg[0];
          st[g] = st[0];
        }
      }
      return { what: `hostile dump (${groups} groups of ${size}, world ${worldSize})`, data: enc.encode(JSON.stringify(d)), mac };
    });
  const malformed = fc
    .tuple(
      invalidJsonPayload(valid, {
        required: ['rank', 'world_size', 'pg_config', 'entries', 'time_ns'],
        constrained: ['rank', 'world_size'],
        maxBytes: 256 * 1024,
      }),
      mac,
    )
    .map(([p, m]) => ({ ...p, mac: m }));
  return fc.oneof({ arbitrary: hostile, weight: 1 }, { arbitrary: malformed, weight: 1 });
}
