// The tcp backend's process side: one Mesh (connections to every other rank, TCP or shared
// memory) that every group of the process shares.
import type { Store } from '../../store';
import { Mesh } from '../../transport/mesh';
import type { BackendProvider } from '../backend';
import { TcpBackend } from './tcp-backend';

export interface OpenTcpOptions {
  rank: number;
  worldSize: number;
  store: Store;
  timeoutMs: number;
  transport: 'auto' | 'tcp' | 'shm';
  secret?: string;
  /** the settings the mesh and each group read (InitOptions.env; default process.env) */
  env?: NodeJS.ProcessEnv;
}

export async function openTcp(o: OpenTcpOptions): Promise<BackendProvider> {
  const env = o.env ?? process.env;
  const mesh = await Mesh.create({
    rank: o.rank,
    size: o.worldSize,
    store: o.store,
    timeoutMs: o.timeoutMs,
    masterAddr: env.MASTER_ADDR,
    transport: o.transport,
    secret: o.secret,
    env,
  });
  return {
    name: 'tcp',
    forGroup: async (id, worldRanks) => new TcpBackend(mesh, id, worldRanks, env),
    close: () => mesh.close(),
  };
}
