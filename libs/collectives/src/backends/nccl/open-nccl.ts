// The nccl backend's process side: one sidecar per process (spawned, or attached at
// CMESH_NCCL_SOCKET / `socketPath`), this rank's GPU, and one communicator per process group,
// created through the group's store as torch does. Where NCCL cannot run, initProcessGroup fails
// here with NcclUnavailableError naming what is missing, and the sidecar is stopped.
import { debug, debugOn } from '../../debug';
import type { Store } from '../../store';
import type { BackendProvider } from '../backend';
import { ncclCapabilities } from './capabilities';
import { NcclCommunicator } from './communicator';
import { chooseDevice } from './device';
import { NcclUnavailableError } from './errors';
import { NcclBackend } from './nccl-backend';
import { NcclSidecar, NcclSidecarOptions } from './sidecar';

/** Attach to the sidecar listening on this Unix socket instead of spawning one. */
export const NCCL_SOCKET_ENV = 'CMESH_NCCL_SOCKET';

/** initProcessGroup's `nccl` options. */
export interface NcclOptions extends Omit<NcclSidecarOptions, 'attachSocketPath'> {
  /** A running sidecar's socket to attach to (default: $CMESH_NCCL_SOCKET, else spawn one). */
  attachSocketPath?: string;
}

export interface OpenNcclOptions {
  rank: number;
  worldSize: number;
  store: Store;
  timeoutMs: number;
  /** This rank's GPU; default LOCAL_RANK, else 0. */
  deviceId?: number;
  nccl?: NcclOptions;
  env?: NodeJS.ProcessEnv;
}

export async function openNccl(o: OpenNcclOptions): Promise<BackendProvider> {
  const env = o.env ?? process.env;
  const attach = o.nccl?.attachSocketPath ?? (env[NCCL_SOCKET_ENV] || undefined);
  // NCCL_DEBUG's lines (the sidecar's stdout) reach this process's stderr unless the caller takes
  // them: with NCCL in-process (torch) they would be in its own output. Not stdout, which programs parse.
  const ncclLog = env.NCCL_DEBUG ? (line: string) => process.stderr.write(`${line}\n`) : undefined;
  const sidecar = new NcclSidecar({ requestTimeoutMs: o.timeoutMs, onSidecarStdout: ncclLog, ...o.nccl, attachSocketPath: attach });
  const avail = await sidecar.start();
  if (!avail.ok) {
    await sidecar.stop();
    throw new NcclUnavailableError(avail.reason ?? 'the sidecar reports NCCL unavailable', 'initProcessGroup', avail.missing);
  }
  try {
    const { client, hello } = sidecar.client('initProcessGroup');
    const device = chooseDevice(o.deviceId, env, hello.deviceCount);
    const capabilities = ncclCapabilities(hello.nccl.version);
    const maxTimeoutMs = hello.limits.maxTimeoutMs;
    if (debugOn)
      debug(
        'init',
        `nccl: sidecar pid ${sidecar.sidecarPid} (${attach ? `attached at ${attach}` : 'spawned'}), NCCL ${hello.nccl.versionString}, device ${device} of ${hello.deviceCount}`,
      );
    return {
      name: 'nccl',
      async forGroup(id, worldRanks) {
        const rank = worldRanks.indexOf(o.rank);
        const comm = await NcclCommunicator.create(client, {
          store: o.store,
          key: `nccl/${id}/unique-id`,
          rank,
          nranks: worldRanks.length,
          device,
          timeoutMs: Math.min(o.timeoutMs, maxTimeoutMs),
        });
        if (debugOn) debug('nccl', `group ${id}: communicator ${comm.comm} ready, rank ${rank} of ${worldRanks.length} on device ${device}`);
        return new NcclBackend(comm, capabilities, worldRanks, o.rank, maxTimeoutMs);
      },
      close: () => sidecar.stop(),
    };
  } catch (e) {
    await sidecar.stop();
    throw e;
  }
}
