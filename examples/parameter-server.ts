// The parameter-server paradigm of "Parameter Server and All-Reduce", over P2P:
// rank 0 is the ParameterServer (holds the model and the optimizer, trains nothing), ranks
// 1..P-1 are Workers. Each step, as in the original's main():
//   1. pull weights:      the server sends the weights to every worker   (fan-out, one to many)
//   2. push gradients:    every worker sends its gradient to the server  (fan-in, many to one)
//   3. aggregate + update: the server sums the gradients and takes an SGD step.
// Every worker computes its gradient on its shard of the step's global batch, so the update is
// the same as allreduce-training.ts's and both reach the same loss; the difference is the
// traffic: the server moves (P-1)x what a worker does, every step.
// Run: cmesh run --nproc-per-node 4 examples/parameter-server.ts [--steps 200 --hidden 64]
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { datasetLoss, initParameters, lossAndGradSum, MlpShape, parameterCount, sgdStep } from './_lib/mlp';
import { batchIndices, Dataset, shardOf } from './_lib/synthetic-data';
import { bytesLine, dataset, lossStr, trainingConfig, TrainingConfig } from './_lib/training';
import { trafficTotals } from './_lib/traffic';

class ParameterServer {
  readonly params: Float32Array;
  private readonly grads: Float32Array[];

  constructor(
    private readonly cfg: TrainingConfig,
    private readonly workers: number[],
  ) {
    this.params = initParameters(cfg.shape, cfg.initSeed);
    const n = parameterCount(cfg.shape);
    // one receive buffer per worker: gradient sum, then the shard's loss sum
    this.grads = workers.map(() => new Float32Array(n + 1));
  }

  /** get_weights, sent to every worker at once (fan-out). */
  async sendWeights(): Promise<void> {
    await Promise.all(this.workers.map((w) => dist.isend(this.params, { dst: w }).wait()));
  }

  /** Receives every worker's gradient (fan-in), then update_model. Returns the batch loss. */
  async updateModel(): Promise<number> {
    await Promise.all(this.workers.map((w, i) => dist.irecv(this.grads[i], { src: w }).wait()));
    const n = this.params.length;
    const total = new Float64Array(n + 1);
    for (const g of this.grads) for (let i = 0; i <= n; i++) total[i] += g[i];
    sgdStep(this.params, total, this.cfg.lr, this.cfg.batchSize); // optimizer.step(); zero_grad()
    return total[n] / this.cfg.batchSize;
  }
}

class Worker {
  private readonly params: Float32Array;
  private readonly grad: Float64Array;
  private readonly message: Float32Array;

  constructor(
    private readonly cfg: TrainingConfig,
    private readonly data: Dataset,
    private readonly index: number,
    private readonly count: number,
  ) {
    const n = parameterCount(cfg.shape);
    this.params = new Float32Array(n);
    this.grad = new Float64Array(n);
    this.message = new Float32Array(n + 1);
  }

  /** pull_weights: load the server's weights. */
  async pullWeights(): Promise<void> {
    await dist.recv(this.params, { src: 0 });
  }

  /** push_gradients: gradient of this worker's shard of the batch, sent to the server. */
  async pushGradients(step: number): Promise<void> {
    const batch = batchIndices(step, this.cfg.batchSize, this.data.samples);
    const shard = shardOf(batch, this.index, this.count);
    this.grad.fill(0);
    const loss = lossAndGradSum(this.cfg.shape, this.params, this.data, shard, this.grad);
    this.message.set(this.grad);
    this.message[this.grad.length] = loss;
    await dist.send(this.message, { dst: 0 });
  }
}

runMain(async () => {
  const cfg = trainingConfig();
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();
  const world = dist.getWorldSize();
  if (world < 2) throw new Error('the parameter server needs at least 2 ranks (a server and a worker)');
  const data = dataset(cfg);
  const shape: MlpShape = cfg.shape;
  const workers = Array.from({ length: world - 1 }, (_, i) => i + 1);

  const server = rank === 0 ? new ParameterServer(cfg, workers) : undefined;
  const worker = rank === 0 ? undefined : new Worker(cfg, data, rank - 1, world - 1);
  if (server) {
    console.log(`parameter server: 1 server, ${workers.length} workers, ${parameterCount(shape)} parameters`);
    console.log(`initial loss: ${lossStr(datasetLoss(shape, server.params, data))}`);
  }

  await dist.barrier();
  dist.resetTrafficCounters();
  const t0 = performance.now();
  for (let step = 0; step < cfg.steps; step++) {
    if (server) {
      await server.sendWeights();
      const loss = await server.updateModel();
      if ((step + 1) % cfg.logEvery === 0) console.log(`step ${step + 1} batch loss ${lossStr(loss)}`);
    } else {
      await worker!.pullWeights();
      await worker!.pushGradients(step);
    }
  }
  const elapsed = performance.now() - t0;
  const { sent, received } = trafficTotals();

  if (server) {
    console.log(`final loss: ${lossStr(datasetLoss(shape, server.params, data))}`);
    console.log(`time per step: ${(elapsed / cfg.steps).toFixed(3)} ms`);
  }
  console.log(bytesLine(rank, sent, received, cfg.steps));
  await dist.destroyProcessGroup();
});
