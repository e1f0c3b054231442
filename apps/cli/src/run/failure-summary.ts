// The failure summary torchrun prints when a worker group fails for good (torch's
// ChildFailedError): one block per failed worker with its time, host, rank, exit code, pid, error
// file and traceback, the first observed failure set apart as the root cause. A worker that
// wrapped its entry point in record() left an error file whose message and stack are shown.
import * as fs from 'fs';
import * as os from 'os';
import type { ErrorFileData } from '@cmesh/collectives';

export interface WorkerFailure {
  rank: number;
  localRank: number;
  /** torch's exitcode: the exit code, or minus the signal number */
  exitcode: number;
  pid?: number;
  /** when the launcher saw it exit (ms since the epoch) */
  at: number;
  errorFile: string;
}

const NOT_AVAILABLE = '<N/A>';

export function exitcodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (signal) return -(os.constants.signals[signal] ?? 0);
  return code ?? 0;
}

/** `2026-11-24_01:02:03` in local time, as torch's isoformat(sep="_") prints a whole-second timestamp. */
function timeOf(seconds: number): string {
  const d = new Date(seconds * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}_${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** The error file's message and time, when the worker wrote one. */
function readErrorFile(file: string): { message: string; seconds?: number } | undefined {
  let data: ErrorFileData;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8')) as ErrorFileData;
  } catch {
    return undefined;
  }
  const m = data.message;
  if (typeof m === 'string') return { message: m, seconds: data.timestamp ? Number(data.timestamp) : undefined };
  if (!m || typeof m !== 'object') return undefined;
  const stamp = m.extraInfo?.timestamp;
  return {
    message: (m.extraInfo?.py_callstack ?? m.message ?? NOT_AVAILABLE).replace(/\n$/, '').replace(/\n/g, '\n  '),
    seconds: stamp ? Number(stamp) : undefined,
  };
}

function signalName(exitcode: number): string {
  const entry = Object.entries(os.constants.signals).find(([, n]) => n === -exitcode);
  return entry ? entry[0] : NOT_AVAILABLE;
}

function formatFailure(idx: number, f: WorkerFailure, host: string): string {
  const recorded = readErrorFile(f.errorFile);
  const seconds = recorded?.seconds ?? Math.floor(f.at / 1000);
  let message = recorded?.message;
  if (!message) {
    message =
      f.exitcode < 0
        ? `Signal ${-f.exitcode} (${signalName(f.exitcode)}) received by PID ${f.pid ?? NOT_AVAILABLE}`
        : "To enable traceback, wrap the worker's entry point in record() (docs/api.md)";
  }
  return [
    `[${idx}]:`,
    `  time      : ${timeOf(seconds)}`,
    `  host      : ${host}`,
    `  rank      : ${f.rank} (local_rank: ${f.localRank})`,
    `  exitcode  : ${f.exitcode} (pid: ${f.pid ?? NOT_AVAILABLE})`,
    `  error_file: ${recorded ? f.errorFile : NOT_AVAILABLE}`,
    `  traceback : ${message}`,
  ].join('\n');
}

/** The first observed failure: the earliest exit seen. */
function rootCause(failures: WorkerFailure[]): WorkerFailure {
  return failures.reduce((a, b) => (b.at < a.at ? b : a));
}

/** torch's ChildFailedError message for `name` (the script) and the failed workers. */
export function formatFailureSummary(name: string, failures: WorkerFailure[], host = os.hostname()): string {
  if (!failures.length) throw new Error('formatFailureSummary: no failure to report');
  const title = `${name} FAILED`;
  const root = rootCause(failures);
  const byRank = [...failures].sort((a, b) => a.rank - b.rank);
  let rootText = '';
  const others: string[] = [];
  let width = title.length;
  byRank.forEach((f, idx) => {
    const text = formatFailure(idx, f, host);
    for (const line of text.split('\n')) width = Math.max(width, line.length);
    if (f === root) rootText = text;
    else others.push(text);
  });
  width = Math.min(width, 60);
  return [
    '',
    '='.repeat(width),
    title,
    '-'.repeat(width),
    'Failures:',
    others.length ? others.join('\n') : '  <NO_OTHER_FAILURES>',
    '-'.repeat(width),
    'Root Cause (first observed failure):',
    rootText,
    '='.repeat(width),
  ].join('\n');
}
