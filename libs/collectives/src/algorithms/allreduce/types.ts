import type { Comm } from '../../transport/comm';
import type { ReduceOp } from '../../reduce-op';
import type { Tensor } from '../../tensor/dtype';
import type { AlgorithmOptions } from '../common';
import type { Scratch } from '../scratch';

/** In-place all-reduce: every rank ends with op over all ranks' `data` (AVG included). */
export type AllReduceFn = (comm: Comm, data: Tensor, op: ReduceOp, scratch: Scratch, opts?: AlgorithmOptions) => Promise<void>;
