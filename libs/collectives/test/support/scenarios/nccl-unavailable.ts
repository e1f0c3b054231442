// initProcessGroup({ backend: 'nccl' }) where something is missing: the error, what it names, and
// that nothing is left behind (no sidecar child, no process group, the store's port free again:
// a tcp group initializes right after on the same MASTER_PORT).
import * as fs from 'fs';

import * as dist from '../../../src';
import { NcclUnavailableError } from '../../../src';

function children(): number[] {
  const text = fs.readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8').trim();
  return text ? text.split(/\s+/).map(Number) : [];
}

export async function run(args: { deviceId?: number; attachSocketPath?: string } | null): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const started = Date.now();
  try {
    await dist.initProcessGroup({
      backend: 'nccl',
      timeout: 20000,
      deviceId: args?.deviceId,
      nccl: args?.attachSocketPath ? { attachSocketPath: args.attachSocketPath } : undefined,
    });
    out.error = null;
    await dist.destroyProcessGroup();
  } catch (e) {
    const err = e as NcclUnavailableError;
    out.error = { name: err.name, code: err.code, typed: e instanceof NcclUnavailableError, missing: err.missing, message: err.message };
  }
  out.ms = Date.now() - started;
  out.initialized = dist.isInitialized();
  out.sidecars = children().length;
  await dist.initProcessGroup({ backend: 'gloo', timeout: 20000 });
  out.tcpAfter = dist.getBackend();
  await dist.destroyProcessGroup();
  return out;
}
