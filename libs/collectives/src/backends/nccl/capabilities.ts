// What the nccl backend can run, by the NCCL version the sidecar loaded: every collective (gather,
// scatter and all-to-all as grouped send/recv, which NCCL has from 2.7; barrier as a 1-element
// all-reduce, as torch does), the library's dtypes (bfloat16 from 2.10), and sum, product, min,
// max (avg from 2.10). NCCL has no bitwise reductions, no receive from any source, and the
// sidecar's all-to-all takes equal blocks.
import type { Collective } from '../../ops/names';
import { COLLECTIVES } from '../../ops/names';
import type { ReduceOp } from '../../reduce-op';
import { DTYPES, DType } from '../../tensor/dtype';
import type { BackendCapabilities } from '../backend';

/** NCCL_VERSION_CODE as a comparable number: 2.7.8 (2708, the old scheme) and 2.27.3 (22703) both become major*10000+minor*100+patch. */
export function ncclVersionCode(version: number): number {
  if (version >= 10000) return version;
  const major = Math.floor(version / 1000);
  const minor = Math.floor((version % 1000) / 100);
  return major * 10000 + minor * 100 + (version % 100);
}

const P2P_OPS: readonly (Collective | 'send' | 'recv')[] = ['gather', 'scatter', 'allToAll', 'send', 'recv'];

export function ncclCapabilities(version: number): BackendCapabilities {
  const v = ncclVersionCode(version);
  const p2p = v >= 20700;
  const v210 = v >= 21000;
  const collectives = COLLECTIVES.filter((c) => p2p || !P2P_OPS.includes(c));
  const dtypes = DTYPES.filter((d: DType) => v210 || d !== 'bfloat16');
  const reduceOps: ReduceOp[] = ['sum', 'product', 'min', 'max', ...(v210 ? (['avg'] as const) : [])];
  const notes: Partial<Record<Collective | 'send' | 'recv', string>> = {};
  const loaded = `the sidecar loaded NCCL ${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`;
  if (!p2p) for (const op of P2P_OPS) notes[op] = `point-to-point needs NCCL 2.7 or later; ${loaded}`;
  notes.allToAll = p2p ? 'NCCL exchanges equal blocks here' : notes.allToAll;
  if (!v210) notes.allReduce = notes.reduce = notes.reduceScatter = `avg and bfloat16 need NCCL 2.10 or later; ${loaded}`;
  return Object.freeze({
    collectives: new Set(collectives),
    p2p,
    recvAnySource: false,
    dtypes: new Set(dtypes),
    reduceOps: new Set(reduceOps),
    unevenAllToAll: false,
    algorithms: false,
    notes,
  });
}
