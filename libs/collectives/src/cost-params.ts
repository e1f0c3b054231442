// The cost model's current parameters per transport, apart from the model itself so that
// algorithms that choose a sub-algorithm at run time (hierarchical: the one between hosts) can
// read them without importing the registry the model is built on.
import type { CostParams } from './algorithms/algorithm';
import { DEFAULT_CHUNK_BYTES } from './algorithms/common';

// Measured on the build machine (2 cores, loopback, Node 20): two-process ping-pong of 8 B gave
// 74 us one way; 16 MiB round trips gave 0.92 ns/B (1.09 GB/s); float32 SUM over 64 MiB ran at
// about 0.55 ns per buffer byte. Recalibrate with calibrate() on other machines.
export const MEASURED_DEFAULTS: Readonly<CostParams> = Object.freeze({
  alpha: 74e-6,
  beta: 0.92e-9,
  gamma: 0.55e-9,
  chunkBytes: DEFAULT_CHUNK_BYTES,
});

// The shared-memory data plane, measured beside TCP on the same machine (ping-pong, 8 B and
// 16 MiB, no busy-polling): 0.7x TCP's latency (the wake-up dominates both) and 0.3x its time per
// byte (one memcpy each side instead of two kernel copies and loopback).
export const SHM_MEASURED_DEFAULTS: Readonly<CostParams> = Object.freeze({ ...MEASURED_DEFAULTS, alpha: 52e-6, beta: 0.28e-9 });

export type CostTransport = 'tcp' | 'shm';

const current: Record<CostTransport, CostParams> = { tcp: { ...MEASURED_DEFAULTS }, shm: { ...SHM_MEASURED_DEFAULTS } };

export function getCostParams(transport: CostTransport = 'tcp'): CostParams {
  return { ...current[transport] };
}

/** Replaces a transport's alpha, beta and gamma (checked by the caller, calibrate()). */
export function setCostParams(transport: CostTransport, alpha: number, beta: number, gamma: number): void {
  current[transport] = { ...current[transport], alpha, beta, gamma };
}
