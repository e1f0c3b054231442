// One process's sidecar: spawns it (or attaches to one already listening, e.g. a pod's sidecar
// container), says hello, and keeps what hello said: whether NCCL is usable here and, if not, why.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { NcclMissing, NcclUnavailableError } from './errors';
import type { SidecarHello } from './protocol';
import { SidecarClient } from './sidecar-client';
import { SidecarProcess, spawnSidecar } from './sidecar-process';

export interface NcclSidecarOptions {
  /** Attach to a sidecar already listening here instead of spawning one. */
  attachSocketPath?: string;
  /** Where a spawned sidecar listens; a fresh temp dir by default. */
  socketPath?: string;
  binary?: string;
  ncclLib?: string;
  cudartLib?: string;
  /** Timeout for sidecar requests that do not give one (ms). */
  requestTimeoutMs?: number;
  startTimeoutMs?: number;
  onSidecarStderr?: (line: string) => void;
  /** NCCL_DEBUG's lines (the sidecar's stdout after it started); dropped without it. */
  onSidecarStdout?: (line: string) => void;
  /** The spawned sidecar's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

export interface NcclAvailability {
  ok: boolean;
  reason?: string;
  /** What this machine lacks, when the sidecar or its hello said so. */
  missing?: NcclMissing[];
}

/** What hello says is missing: the CUDA runtime, a device (with a runtime), the NCCL library. */
export function missingFromHello(hello: SidecarHello): NcclMissing[] {
  const missing: NcclMissing[] = [];
  if (!hello.cuda.available) missing.push('cuda-runtime');
  else if (hello.deviceCount < 1) missing.push('device');
  if (!hello.nccl.available) missing.push('nccl-library');
  return missing;
}

export class NcclSidecar {
  private connection: SidecarClient | null = null;
  private proc: SidecarProcess | null = null;
  private tempDir: string | null = null;
  private helloInfo: SidecarHello | null = null;
  private availability: NcclAvailability = { ok: false, reason: 'nccl backend not started' };
  private wentAway = false;

  constructor(private readonly opts: NcclSidecarOptions = {}) {}

  /**
   * Spawns or attaches to the sidecar and says hello. Never throws for an unusable GPU/NCCL or a
   * missing sidecar: available() then carries the reason.
   */
  async start(): Promise<NcclAvailability> {
    this.wentAway = false;
    try {
      let socketPath = this.opts.attachSocketPath;
      if (!socketPath) {
        socketPath = this.opts.socketPath;
        if (!socketPath) {
          this.tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cmesh-nccl-'));
          socketPath = path.join(this.tempDir, 'sidecar.sock');
        }
        this.proc = await spawnSidecar({
          socketPath,
          binary: this.opts.binary,
          ncclLib: this.opts.ncclLib,
          cudartLib: this.opts.cudartLib,
          startTimeoutMs: this.opts.startTimeoutMs,
          onStderr: this.opts.onSidecarStderr,
          onStdout: this.opts.onSidecarStdout,
          env: this.opts.env,
        });
      }
      this.connection = await SidecarClient.connect(socketPath, { defaultTimeoutMs: this.opts.requestTimeoutMs ?? 60_000 });
      this.helloInfo = await this.connection.hello();
      this.availability = this.helloInfo.available
        ? { ok: true }
        : { ok: false, reason: this.helloInfo.reason ?? 'sidecar reports NCCL unavailable', missing: missingFromHello(this.helloInfo) };
    } catch (e) {
      const err = e as Error;
      // a binary that is not there (or not executable) is missing; anything else is the sidecar failing
      const missing: NcclMissing[] =
        e instanceof NcclUnavailableError && e.missing.length
          ? [...e.missing]
          : !this.opts.attachSocketPath && /\b(ENOENT|EACCES)\b/.test(err.message)
            ? ['sidecar-binary']
            : ['sidecar'];
      this.availability = { ok: false, reason: `nccl sidecar failed to start: ${err.message}`, missing };
      await this.stop();
    }
    return this.availability;
  }

  available(): NcclAvailability {
    // a sidecar that went away (crashed, killed) is unusable until started again
    if (this.availability.ok && this.connection?.closed) {
      this.wentAway = true;
      this.availability = { ok: false, reason: `the nccl sidecar went away (${this.connection.closeReason})`, missing: ['sidecar'] };
    }
    return this.availability;
  }

  /** Whether the sidecar was usable and went away since it was last started (restart() may bring it back). */
  get lost(): boolean {
    this.available();
    return this.wentAway;
  }

  /** Stops what is left of the sidecar (by pid) and starts it again. */
  async restart(): Promise<NcclAvailability> {
    await this.stop();
    return this.start();
  }

  /** The sidecar's hello (devices, NCCL version), once started. */
  get hello(): SidecarHello | null {
    return this.helloInfo;
  }

  /** A fresh hello: live handles (`resources`) and the rest, as the sidecar sees them now. */
  async helloNow(): Promise<SidecarHello> {
    if (!this.connection) throw new NcclUnavailableError(this.availability.reason ?? 'nccl backend not started', 'hello');
    return this.connection.hello();
  }

  /** The socket the sidecar listens on (attached or spawned), while started: other processes may attach there. */
  get socketPath(): string | null {
    if (!this.connection) return null;
    return this.opts.attachSocketPath ?? this.proc?.socketPath ?? null;
  }

  get sidecarPid(): number | null {
    return this.proc?.pid ?? this.helloInfo?.pid ?? null;
  }

  /** The connection of a sidecar that can run NCCL; NcclUnavailableError (with the reason) otherwise. */
  client(op?: string): { client: SidecarClient; hello: SidecarHello } {
    if (!this.available().ok || !this.connection || !this.helloInfo) {
      throw new NcclUnavailableError(this.availability.reason ?? 'nccl backend unavailable', op, this.availability.missing);
    }
    return { client: this.connection, hello: this.helloInfo };
  }

  /** Closes the connection and stops a sidecar this process spawned (by pid). */
  async stop(): Promise<void> {
    this.connection?.close();
    this.connection = null;
    if (this.proc) await this.proc.stop();
    this.proc = null;
    if (this.tempDir) fs.rmSync(this.tempDir, { recursive: true, force: true });
    this.tempDir = null;
    if (this.availability.ok) this.availability = { ok: false, reason: 'nccl backend stopped' };
  }
}
