// A synthetic classification data set ("blobs"): one Gaussian cloud per class around a random
// center. Every rank generates the same data from the same seed, so no data moves on the wire.
import { Generator } from './random';

export interface Dataset {
  /** samples x features, row-major */
  x: Float32Array;
  /** class of each sample */
  y: Int32Array;
  samples: number;
  features: number;
  classes: number;
}

export function makeBlobs(opts: { samples: number; features: number; classes: number; seed: number; spread?: number }): Dataset {
  const { samples, features, classes, seed } = opts;
  const spread = opts.spread ?? 0.5;
  const gen = new Generator(seed);
  const centers = Float64Array.from({ length: classes * features }, () => gen.normal() * spread);
  const x = new Float32Array(samples * features);
  const y = new Int32Array(samples);
  for (let i = 0; i < samples; i++) {
    const c = gen.int(classes);
    y[i] = c;
    for (let f = 0; f < features; f++) x[i * features + f] = centers[c * features + f] + gen.normal();
  }
  return { x, y, samples, features, classes };
}

/** The global batch of step `step`: B consecutive samples, wrapping around the data set. */
export function batchIndices(step: number, batchSize: number, samples: number): Int32Array {
  return Int32Array.from({ length: batchSize }, (_, k) => (step * batchSize + k) % samples);
}

/** Shard j of k of a batch: contiguous, sizes differ by at most one. */
export function shardOf<T extends { subarray(a: number, b: number): T; length: number }>(batch: T, j: number, k: number): T {
  const lo = Math.floor((j * batch.length) / k);
  const hi = Math.floor(((j + 1) * batch.length) / k);
  return batch.subarray(lo, hi);
}
