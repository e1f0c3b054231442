// Shapes of the sidecar's replies (native/nccl-sidecar/README.md, "Ops"), checked at the edge.
import type { SweepOp } from '../../ops/names';
import type { ReduceOp } from '../../reduce-op';
import { z } from 'zod';

/** The protocol hello reports; 2 = binary request/reply headers (frame-codec.ts). */
export const SIDECAR_PROTOCOL_VERSION = 2;

const nullableString = z.string().nullable().optional();

export const helloSchema = z.object({
  protocol: z.number().int(),
  sidecarVersion: z.string(),
  pid: z.number().int(),
  available: z.boolean(),
  reason: z.string().optional(),
  cuda: z.object({
    available: z.boolean(),
    reason: z.string().optional(),
    library: nullableString,
    runtimeVersion: z.number().int(),
    driverVersion: z.number().int(),
  }),
  deviceCount: z.number().int().nonnegative(),
  devices: z.array(
    z.object({
      index: z.number().int(),
      name: z.string(),
      totalMemoryBytes: z.number(),
      pciBusId: z.string(),
    }),
  ),
  nccl: z.object({
    available: z.boolean(),
    reason: z.string().optional(),
    library: nullableString,
    version: z.number().int(),
    versionString: nullableString,
    nonblocking: z.boolean(),
    /** ops launch on a blocking communicator split from the non-blocking one (absent from older sidecars) */
    splitLaunches: z.boolean().optional(),
  }),
  limits: z.object({
    maxFrameBytes: z.number().int().positive(),
    defaultTimeoutMs: z.number().int().positive(),
    maxTimeoutMs: z.number().int().positive(),
    stallTimeoutMs: z.number().int().positive(),
  }),
  /** Live handles of all the sidecar's connections (absent from sidecars before handles were per connection). */
  resources: z.object({ comms: z.number().int(), buffers: z.number().int(), bufferBytes: z.number().int() }).optional(),
  ops: z.array(z.string()),
});
export type SidecarHello = z.infer<typeof helloSchema>;

export const uniqueIdSchema = z.object({ uniqueId: z.string().regex(/^[0-9a-f]{256}$/) });
export const commSchema = z.object({
  comm: z.number().int().positive(),
  rank: z.number().int(),
  nranks: z.number().int(),
  device: z.number().int(),
  /** whether the communicator its ops launch on answers ncclInProgress */
  launches: z.enum(['blocking', 'non-blocking']).optional(),
});
export type CommInfo = z.infer<typeof commSchema>;
export const bufSchema = z.object({ buf: z.number().int().positive(), bytes: z.number().int(), device: z.number().int() });
export const collectiveResultSchema = z.object({
  collective: z.string(),
  count: z.number().int(),
  dtype: z.string(),
  iters: z.number().int(),
  warmup: z.number().int(),
  /** The slowest rank's time per iteration when `slowestRank`, else this rank's. */
  deviceSeconds: z.number(),
  rankDeviceSeconds: z.number().optional(),
  slowestRank: z.boolean().optional(),
  hostSeconds: z.number(),
  wallSeconds: z.number(),
});
export type CollectiveResult = z.infer<typeof collectiveResultSchema>;
export const asyncErrorSchema = z.object({
  aborted: z.boolean(),
  reason: z.string().optional(),
  result: z.number().int().nullable(),
  inProgress: z.boolean().optional(),
  message: z.string().optional(),
});
export type AsyncErrorState = z.infer<typeof asyncErrorSchema>;

/** Collectives the sidecar runs (README "collective"): every sweep op, by the library's names, and the two halves of sendRecv. */
export type NcclCollective = SweepOp | 'send' | 'recv';

/** The sidecar's dtype names (a superset of the library's DType). */
export type SidecarDType = 'int8' | 'uint8' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'float16' | 'float32' | 'float64' | 'bfloat16';

/** The library's reduce ops NCCL has (no bitwise ones). */
export type SidecarRedOp = Exclude<ReduceOp, 'band' | 'bor' | 'bxor'>;

export interface CollectiveRequest {
  comm: number;
  collective: NcclCollective;
  count: number;
  dtype?: SidecarDType;
  redOp?: SidecarRedOp;
  root?: number;
  sendPeer?: number;
  recvPeer?: number;
  sendBuf?: number;
  recvBuf?: number;
  sendOffset?: number;
  recvOffset?: number;
  warmup?: number;
  iters?: number;
}
