// Where workers' output goes: torchrun's --log-dir, --redirects, --tee and --local-ranks-filter.
// On the console every line carries its rank ("[rank3]:"); a redirected stream goes to its file
// only, a teed one to both; --local-ranks-filter keeps the other local ranks off the console (their
// files are written as asked). Files follow torch's layout:
//   <log-dir>/<run id>_<random>/attempt_<restart count>/<local rank>/{stdout.log,stderr.log,error.json}
// error.json is the worker's TORCHELASTIC_ERROR_FILE (written by record()). Without --log-dir the
// run's directory is a temporary one, removed at the end unless it holds redirected or teed logs
// or an error file that the failure summary names.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Readable, Writable } from 'stream';
import { InvalidArgumentError } from '@cmesh/collectives';
import { prefixLines } from './line-prefix';

/** torch's Std: 0 none, 1 stdout, 2 stderr, 3 both. */
export type Std = 0 | 1 | 2 | 3;
/** One value for every local rank, or a value per local rank (the others: 0). */
export type StdSpec = Std | ReadonlyMap<number, Std>;

export interface LogOptions {
  logDir?: string;
  redirects?: StdSpec;
  tee?: StdSpec;
  /** local ranks whose output is shown on the console (all when unset) */
  localRanksFilter?: ReadonlySet<number>;
}

/** `3`, or `0:1,1:2` (local rank:value), like torchrun's -r / -t. */
export function parseStd(flag: string, v: string): StdSpec {
  if (/^[0-3]$/.test(v)) return Number(v) as Std;
  if (/^(\d+:[0-3],)*\d+:[0-3]$/.test(v)) {
    const out = new Map<number, Std>();
    for (const pair of v.split(',')) {
      const [rank, value] = pair.split(':').map(Number);
      if (out.has(rank)) throw new InvalidArgumentError(`${flag} ${JSON.stringify(v)}: local rank ${rank} given twice`);
      out.set(rank, value as Std);
    }
    return out;
  }
  throw new InvalidArgumentError(`${flag} must be 0-3 (none, stdout, stderr, both) or local_rank:value pairs like 0:1,1:2, got ${JSON.stringify(v)}`);
}

export function stdFor(spec: StdSpec | undefined, localRank: number): Std {
  if (spec === undefined) return 0;
  return typeof spec === 'number' ? spec : (spec.get(localRank) ?? 0);
}

/** `0,2`: the local ranks shown on the console. */
export function parseLocalRanksFilter(v: string): Set<number> {
  if (!/^\d+(,\d+)*$/.test(v))
    throw new InvalidArgumentError(`--local-ranks-filter must be local ranks separated by commas, like 0,2, got ${JSON.stringify(v)}`);
  return new Set(v.split(',').map(Number));
}

const STDOUT = 1;
const STDERR = 2;

/** Where one stream of one worker goes. */
interface StreamRoute {
  console: boolean;
  file?: string;
}

export interface WorkerStreams {
  stdout: StreamRoute;
  stderr: StreamRoute;
  errorFile: string;
}

export class WorkerLogs {
  private constructor(
    readonly dir: string,
    private readonly temporary: boolean,
    private readonly opts: LogOptions,
  ) {}

  /**
   * The run's directory: made under --log-dir (or in the temporary directory when streams go to
   * files); otherwise only named, in the temporary directory, and made by the first worker that
   * writes its error file there.
   */
  static create(opts: LogOptions, runId: string): WorkerLogs {
    const temporary = !opts.logDir;
    const root = opts.logDir ?? os.tmpdir();
    const prefix = path.join(root, temporary ? `cmesh-run-${safe(runId)}_` : `${safe(runId)}_`);
    if (temporary && !streamsToFiles(opts)) return new WorkerLogs(`${prefix}${process.pid}${crypto.randomBytes(4).toString('hex')}`, true, opts);
    fs.mkdirSync(root, { recursive: true });
    return new WorkerLogs(fs.mkdtempSync(prefix), temporary, opts);
  }

  /** True when some worker's stream is written to a file. */
  get writesFiles(): boolean {
    return streamsToFiles(this.opts);
  }

  /**
   * Prepares attempt `restartCount` for `nproc` workers and returns where each one's streams go.
   * A restart for a membership change keeps the count, so its attempt directory starts afresh.
   */
  attempt(restartCount: number, nproc: number): WorkerStreams[] {
    const attemptDir = path.join(this.dir, `attempt_${restartCount}`);
    fs.rmSync(attemptDir, { recursive: true, force: true });
    return Array.from({ length: nproc }, (_, local) => {
      const dir = path.join(attemptDir, String(local));
      if (!this.temporary || this.writesFiles) fs.mkdirSync(dir, { recursive: true });
      const redirect = stdFor(this.opts.redirects, local);
      const tee = stdFor(this.opts.tee, local);
      const shown = !this.opts.localRanksFilter || this.opts.localRanksFilter.has(local);
      const route = (bit: number, name: string): StreamRoute => ({
        console: shown && !(redirect & bit),
        file: (redirect | tee) & bit ? path.join(dir, name) : undefined,
      });
      return { stdout: route(STDOUT, 'stdout.log'), stderr: route(STDERR, 'stderr.log'), errorFile: path.join(dir, 'error.json') };
    });
  }

  /** Removes a temporary directory unless it holds logs the user asked for, or error files a failure summary names (`keepErrorFiles`). */
  cleanup(keepErrorFiles: boolean): void {
    if (this.temporary && !this.writesFiles && !keepErrorFiles) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

function streamsToFiles(opts: LogOptions): boolean {
  const any = (s: StdSpec | undefined) => s !== undefined && (typeof s === 'number' ? s !== 0 : [...s.values()].some((v) => v !== 0));
  return any(opts.redirects) || any(opts.tee);
}

function safe(runId: string): string {
  return runId.replace(/[^A-Za-z0-9_.-]/g, '_');
}

/** Connects one worker stream to the console (prefixed) and/or its file; resolves when the stream ends and the file is written. */
export function routeStream(from: Readable, route: StreamRoute, consoleOut: Writable, prefix: string): Promise<void> {
  const done: Promise<void>[] = [];
  if (route.file) {
    const file = fs.createWriteStream(route.file);
    from.pipe(file);
    done.push(new Promise((resolve) => file.once('close', () => resolve()).once('error', () => resolve())));
  }
  if (route.console) done.push(prefixLines(from, consoleOut, prefix));
  if (!route.file && !route.console) from.resume(); // nobody reads it: keep the pipe flowing
  if (!done.length) done.push(new Promise((resolve) => from.once('close', resolve)));
  return Promise.all(done).then(() => undefined);
}
