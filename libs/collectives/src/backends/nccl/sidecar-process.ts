// Finding, building and running the sidecar binary. A process either spawns its own sidecar
// (one per process: a rank agent, a training process) or attaches to one already running, e.g.
// the sidecar container of its pod.
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { NcclUnavailableError, SidecarConnectionError, SidecarTimeoutError } from './errors';

/** The repository's CMake build of native/nccl-sidecar (where a checkout's binary is found). */
export const SIDECAR_BUILD_DIR = path.resolve(__dirname, '../../../../../native/nccl-sidecar/build');
const BINARY_NAME = 'cmesh-nccl-sidecar';
/** A line of sidecar output longer than this is cut (its head dropped) before it is forwarded. */
const MAX_PARTIAL_LINE = 64 * 1024;

/** The sidecar binary: $CMESH_NCCL_SIDECAR, else the repository's CMake build output, else on PATH. */
export function locateSidecarBinary(): string {
  const fromEnv = process.env.CMESH_NCCL_SIDECAR;
  if (fromEnv) {
    if (!fs.existsSync(fromEnv))
      throw new NcclUnavailableError(`sidecar binary not found at ${fromEnv} (from CMESH_NCCL_SIDECAR)`, undefined, ['sidecar-binary']);
    return fromEnv;
  }
  const candidates = [
    path.join(SIDECAR_BUILD_DIR, BINARY_NAME),
    ...(process.env.PATH ?? '')
      .split(path.delimiter)
      .filter(Boolean)
      .map((d) => path.join(d, BINARY_NAME)),
  ];
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) {
    throw new NcclUnavailableError(
      `${BINARY_NAME} not found (looked in ${SIDECAR_BUILD_DIR} and on PATH): build it from native/nccl-sidecar (\`make native\`) and set CMESH_NCCL_SIDECAR to its path, or put it on PATH`,
      undefined,
      ['sidecar-binary'],
    );
  }
  return found;
}

export interface SpawnSidecarOptions {
  socketPath: string;
  binary?: string;
  ncclLib?: string;
  cudartLib?: string;
  defaultTimeoutMs?: number;
  stallTimeoutMs?: number;
  maxFrameBytes?: number;
  env?: NodeJS.ProcessEnv;
  /** How long to wait for the "listening" line (ms). */
  startTimeoutMs?: number;
  /** Receives the sidecar's stderr lines (diagnostics). */
  onStderr?: (line: string) => void;
  /**
   * Receives the stdout lines after the "listening" line: NCCL_DEBUG's output (NCCL writes it to
   * stdout), the first thing to read on a failed multi-GPU run. Without it they are dropped.
   */
  onStdout?: (line: string) => void;
}

export interface SidecarExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A sidecar process this process started; stop() ends it by pid. */
export class SidecarProcess {
  readonly exited: Promise<SidecarExit>;
  private exitInfo: SidecarExit | null = null;

  constructor(
    private readonly child: ChildProcess,
    readonly socketPath: string,
  ) {
    // A process that exits without stopping its sidecar (process.exit, an uncaught error) takes
    // it along: a sidecar left behind would hold its GPU memory. (SIGKILL gives no chance.)
    const onOwnerExit = () => {
      if (this.exitInfo === null && child.pid !== undefined) {
        try {
          process.kill(child.pid, 'SIGTERM');
        } catch {
          // already gone
        }
      }
    };
    process.once('exit', onOwnerExit);
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        process.off('exit', onOwnerExit);
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 5000): Promise<SidecarExit> {
    if (this.exitInfo) return this.exitInfo;
    process.kill(this.pid, 'SIGTERM');
    const timer = new Promise<null>((r) => setTimeout(() => r(null), graceMs).unref());
    const first = await Promise.race([this.exited, timer]);
    if (first) return first;
    if (this.exitInfo === null) process.kill(this.pid, 'SIGKILL');
    return this.exited;
  }
}

/** Starts a sidecar and resolves once its socket accepts connections. */
export function spawnSidecar(opts: SpawnSidecarOptions): Promise<SidecarProcess> {
  const binary = opts.binary ?? locateSidecarBinary();
  const args = ['--socket', opts.socketPath];
  if (opts.ncclLib) args.push('--nccl-lib', opts.ncclLib);
  if (opts.cudartLib) args.push('--cudart-lib', opts.cudartLib);
  if (opts.defaultTimeoutMs) args.push('--default-timeout-ms', String(opts.defaultTimeoutMs));
  if (opts.stallTimeoutMs) args.push('--stall-timeout-ms', String(opts.stallTimeoutMs));
  if (opts.maxFrameBytes) args.push('--max-frame-bytes', String(opts.maxFrameBytes));
  const child = spawn(binary, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const proc = new SidecarProcess(child, opts.socketPath);
  const startTimeoutMs = opts.startTimeoutMs ?? 30_000;

  let stderrTail = '';
  let stderrPartial = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (s: string) => {
    stderrTail = (stderrTail + s).slice(-4000);
    stderrPartial += s;
    const lines = stderrPartial.split('\n');
    stderrPartial = lines.pop()!;
    for (const l of lines) opts.onStderr?.(l);
  });

  return new Promise((resolve, reject) => {
    let stdout = '';
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(() => {
      settle(() => {
        void proc.stop(1000);
        reject(new SidecarTimeoutError(`sidecar did not start listening on ${opts.socketPath} within ${startTimeoutMs} ms`));
      });
    }, startTimeoutMs);
    child.once('error', (e) => settle(() => reject(new SidecarConnectionError(`cannot start sidecar ${binary}: ${e.message}`))));
    // 'close' (not 'exit'): stderr has been read to the end, so the message has the reason.
    child.once('close', (code, signal) =>
      settle(() => reject(new SidecarConnectionError(`sidecar exited before listening (code ${code}, signal ${signal}): ${stderrTail.trim()}`))),
    );
    child.stdout!.setEncoding('utf8');
    const onStdout = (s: string) => {
      stdout += s;
      if (!stdout.includes('"event":"listening"')) return;
      // Later output (NCCL_DEBUG writes to stdout) goes to onStdout line by line, or is drained
      // and dropped: never kept, or a long-lived sidecar's would grow without bound.
      const eol = stdout.indexOf('\n', stdout.indexOf('"event":"listening"'));
      let partial = eol < 0 ? '' : stdout.slice(eol + 1);
      let restOfListening = eol < 0; // the listening line's tail is still to come
      stdout = '';
      child.stdout!.off('data', onStdout);
      const forward = opts.onStdout;
      if (forward) {
        const emit = (s: string) => {
          partial += s;
          const lines = partial.split('\n');
          partial = lines.pop()!.slice(-MAX_PARTIAL_LINE);
          if (restOfListening && lines.length) {
            lines.shift();
            restOfListening = false;
          }
          for (const l of lines) if (l) forward(l);
        };
        emit('');
        child.stdout!.on('data', emit);
      } else {
        child.stdout!.resume();
      }
      settle(() => resolve(proc));
    };
    child.stdout!.on('data', onStdout);
  });
}
