// The CPU simulation of CUDA and NCCL (native/nccl-sim, built beside the sidecar by its CMake
// build): tests point a sidecar at these libraries instead of the real ones.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { SIDECAR_BUILD_DIR } from '@cmesh/collectives/nccl';

/** The sidecar's sources (its CMake project builds into the library's SIDECAR_BUILD_DIR). */
export const SIDECAR_SOURCE_DIR = path.resolve(__dirname, '../../../native/nccl-sidecar');

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

/**
 * Configures and builds the sidecar (and, with its tests, the simulation) with CMake, serialised
 * with flock so that concurrent test workers share one build, and returns the binary's path.
 */
export function buildSidecar(timeoutMs = 300_000): string {
  fs.mkdirSync(SIDECAR_BUILD_DIR, { recursive: true });
  const lock = path.join(SIDECAR_BUILD_DIR, '.build.lock');
  const script =
    `cmake -S "${SIDECAR_SOURCE_DIR}" -B "${SIDECAR_BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release >/dev/null && ` +
    `cmake --build "${SIDECAR_BUILD_DIR}" -j2 >/dev/null`;
  execFileSync('flock', [lock, 'bash', '-c', script], { timeout: timeoutMs, stdio: ['ignore', 'ignore', 'pipe'] });
  return path.join(SIDECAR_BUILD_DIR, 'cmesh-nccl-sidecar');
}
