// The CPU simulation of CUDA and NCCL (native/nccl-sim, built beside the sidecar by its CMake
// build): tests point a sidecar at these libraries instead of the real ones.
import * as path from 'path';
import { SIDECAR_BUILD_DIR } from '@cmesh/collectives';

const SIM_DIR = path.join(SIDECAR_BUILD_DIR, 'nccl-sim');
export const NCCL_SIM_LIB = path.join(SIM_DIR, 'libcmesh-sim-nccl.so');
export const CUDART_SIM_LIB = path.join(SIM_DIR, 'libcmesh-sim-cudart.so');

/** A sidecar's environment for the simulation: 4 devices; every wait in it gives up after 20 s, so no test can hang on it. */
export const NCCL_SIM_ENV = {
  CMESH_NCCL_LIB: NCCL_SIM_LIB,
  CMESH_CUDART_LIB: CUDART_SIM_LIB,
  CMESH_SIM_DEVICES: '4',
  CMESH_SIM_HANG_MS: '20000',
};
