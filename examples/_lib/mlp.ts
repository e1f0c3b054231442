// A two-layer perceptron (Linear -> ReLU -> Linear -> log_softmax, NLL loss) in plain
// TypeScript with hand-written backward, over one flat Float32Array of parameters so the
// whole model (or its gradient) is one tensor on the wire.
import { Dataset } from './synthetic-data';
import { Generator } from './random';

export interface MlpShape {
  features: number;
  hidden: number;
  classes: number;
}

/** Offsets of W1 [hidden x features], b1 [hidden], W2 [classes x hidden], b2 [classes]. */
function layout(s: MlpShape) {
  const w1 = 0;
  const b1 = w1 + s.hidden * s.features;
  const w2 = b1 + s.hidden;
  const b2 = w2 + s.classes * s.hidden;
  return { w1, b1, w2, b2, size: b2 + s.classes };
}

export function parameterCount(s: MlpShape): number {
  return layout(s).size;
}

/** torch.nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases. */
export function initParameters(s: MlpShape, seed: number): Float32Array {
  const L = layout(s);
  const gen = new Generator(seed);
  const p = new Float32Array(L.size);
  const k1 = 1 / Math.sqrt(s.features);
  const k2 = 1 / Math.sqrt(s.hidden);
  for (let i = L.w1; i < L.w2; i++) p[i] = (gen.uniform() * 2 - 1) * k1;
  for (let i = L.w2; i < L.size; i++) p[i] = (gen.uniform() * 2 - 1) * k2;
  return p;
}

/**
 * Sum over `indices` of the NLL loss; when `grad` is given, adds the sum of the per-sample
 * gradients into it (a sum, not a mean, so shards of a batch add up to the whole batch's).
 */
export function lossAndGradSum(s: MlpShape, params: Float32Array, data: Dataset, indices: ArrayLike<number>, grad?: Float64Array): number {
  const L = layout(s);
  const { features: F, hidden: H, classes: C } = s;
  const h = new Float64Array(H);
  const logits = new Float64Array(C);
  const dlogits = new Float64Array(C);
  const dh = new Float64Array(H);
  let loss = 0;
  for (let n = 0; n < indices.length; n++) {
    const i = indices[n];
    const xo = i * F;
    for (let j = 0; j < H; j++) {
      let a = params[L.b1 + j];
      const wo = L.w1 + j * F;
      for (let f = 0; f < F; f++) a += params[wo + f] * data.x[xo + f];
      h[j] = a > 0 ? a : 0;
    }
    let max = -Infinity;
    for (let c = 0; c < C; c++) {
      let a = params[L.b2 + c];
      const wo = L.w2 + c * H;
      for (let j = 0; j < H; j++) a += params[wo + j] * h[j];
      logits[c] = a;
      if (a > max) max = a;
    }
    let sumExp = 0;
    for (let c = 0; c < C; c++) sumExp += Math.exp(logits[c] - max);
    const logZ = max + Math.log(sumExp);
    const target = data.y[i];
    loss += logZ - logits[target];
    if (!grad) continue;
    for (let c = 0; c < C; c++) dlogits[c] = Math.exp(logits[c] - logZ) - (c === target ? 1 : 0);
    dh.fill(0);
    for (let c = 0; c < C; c++) {
      const g = dlogits[c];
      const wo = L.w2 + c * H;
      grad[L.b2 + c] += g;
      for (let j = 0; j < H; j++) {
        grad[wo + j] += g * h[j];
        dh[j] += g * params[wo + j];
      }
    }
    for (let j = 0; j < H; j++) {
      if (h[j] <= 0) continue;
      const g = dh[j];
      const wo = L.w1 + j * F;
      grad[L.b1 + j] += g;
      for (let f = 0; f < F; f++) grad[wo + f] += g * data.x[xo + f];
    }
  }
  return loss;
}

/** Mean loss over the whole data set. */
export function datasetLoss(s: MlpShape, params: Float32Array, data: Dataset): number {
  const all = Int32Array.from({ length: data.samples }, (_, i) => i);
  return lossAndGradSum(s, params, data, all) / data.samples;
}

/** SGD: p -= lr * gradSum / batchSize (the mean gradient of the batch). */
export function sgdStep(params: Float32Array, gradSum: ArrayLike<number>, lr: number, batchSize: number): void {
  const scale = lr / batchSize;
  for (let i = 0; i < params.length; i++) params[i] -= scale * gradSum[i];
}
