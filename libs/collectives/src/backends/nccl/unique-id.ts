// The NCCL unique id travels through the process group's store, as torch's ProcessGroupNCCL
// does it: rank 0 asks NCCL for one and publishes it; the other ranks wait for it under the key.
import { DistTimeoutError, InvalidArgumentError } from '../../errors';
import type { Store } from '../../store';
import type { SidecarClient } from './sidecar-client';

export async function exchangeUniqueId(client: SidecarClient, store: Store, key: string, rank: number, timeoutMs: number): Promise<string> {
  if (rank === 0) {
    const id = await client.getUniqueId(timeoutMs);
    await store.set(key, id);
    return id;
  }
  let value: Buffer;
  try {
    value = await store.get(key, timeoutMs);
  } catch (e) {
    if (e instanceof DistTimeoutError) {
      throw new DistTimeoutError(`rank ${rank} waited ${timeoutMs} ms for rank 0's NCCL unique id at store key ${key}`, {
        op: 'commInitRank',
        rank,
        peers: [0],
      });
    }
    throw e;
  }
  const id = value.toString('utf8');
  if (!/^[0-9a-f]{256}$/.test(id)) {
    throw new InvalidArgumentError(`store key ${key} does not hold an NCCL unique id (256 hex digits)`);
  }
  return id;
}
