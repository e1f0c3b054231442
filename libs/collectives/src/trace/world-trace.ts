// The flight recorder of one initialized world: its groups' traces, the exchange through the
// world's store, the dump file on a failure (CMESH_TRACE_DUMP_DIR) and the desync report that a
// timeout's error carries.
import type { Store } from '../store';
import { GroupReport, analyzeTraces } from './analysis';
import { TRACE_DUMP_DIR_ENV, TraceDump, buildDump, buildSummary, writeDump } from './dump';
import { TraceExchange, traceExchangeMs } from './exchange';
import { FlightRecorder, GroupTrace, flightRecorder } from './recorder';

export interface WorldTraceOptions {
  rank: number;
  worldSize: number;
  store: Store;
  env?: NodeJS.ProcessEnv;
}

export class WorldTrace {
  readonly recorder: FlightRecorder;
  readonly groups: GroupTrace[] = [];
  readonly job: string | undefined;
  readonly dumpDir: string | undefined;
  private readonly exchange: TraceExchange;

  constructor(readonly opts: WorldTraceOptions) {
    const env = opts.env ?? process.env;
    this.recorder = flightRecorder();
    this.recorder.rank = opts.rank;
    // an agent's job worker names its job; `cmesh run` names its run
    this.job = env.CMESH_TRACE_JOB || env.TORCHELASTIC_RUN_ID || env.CMESH_RUN_ID || undefined;
    this.dumpDir = env[TRACE_DUMP_DIR_ENV] || undefined;
    this.exchange = new TraceExchange(
      opts.store,
      opts.rank,
      () => this.summary(),
      () => this.dumpIfAsked(),
      this.recorder.enabled ? traceExchangeMs(env) : 0,
    );
    this.exchange.start();
  }

  get enabled(): boolean {
    return this.recorder.enabled;
  }

  /** The trace of a group this process is a member of (undefined when the recorder is off). */
  group(pgId: number, ranks: readonly number[], backend: string): GroupTrace | undefined {
    if (!this.recorder.enabled) return undefined;
    const g = this.recorder.group(pgId, ranks, this.opts.rank, backend);
    this.groups.push(g);
    return g;
  }

  private meta() {
    return { rank: this.opts.rank, worldSize: this.opts.worldSize, job: this.job, groups: this.groups };
  }

  dump(): TraceDump {
    return buildDump(this.recorder, this.meta());
  }

  summary(): TraceDump {
    return buildSummary(this.recorder, this.meta());
  }

  /** Writes <dir>/cmesh_trace_rank_<rank>.json (dir: the argument, else CMESH_TRACE_DUMP_DIR). */
  writeDump(dir: string | undefined = this.dumpDir): string {
    return writeDump(this.dump(), dir as string);
  }

  /** A failure (timeout, dead peer, mismatch) or a peer's request: dump when a directory is set. */
  dumpIfAsked(): void {
    if (!this.dumpDir) return;
    try {
      this.writeDump();
    } catch (e) {
      console.error(`cmesh: flight recorder dump to ${this.dumpDir} failed: ${(e as Error).message}`);
    }
  }

  /**
   * After a timeout of collective `seq` of group `g`: what every other member is doing, from their
   * answers within the exchange's deadline. Undefined when the exchange is off.
   */
  async desync(g: GroupTrace): Promise<{ report: GroupReport; lines: string[] } | undefined> {
    if (this.exchange.deadlineMs <= 0) return undefined;
    const dumps = await this.exchange.collect(g.ranks);
    const report = analyzeTraces(dumps.map((d) => ({ ...d, job: undefined }))).find((r) => r.pg === String(g.pgId));
    if (!report || report.seq === undefined) return undefined;
    // the sentences about the members not waiting (and how many more did not answer)
    const lines = report.lines.slice(1);
    return { report, lines };
  }

  /** The world is destroyed: no more polling, and nothing of it counts as in flight (metric, dumps). */
  close(): void {
    this.exchange.stop();
    this.recorder.abandon(this.groups, 'DESTROYED');
  }
}
