// Data-parallel training with all-reduce (the alternative to the parameter server in "Parameter Server and All-Reduce"):
// every rank holds the model, computes the gradient of its shard of the step's global batch,
// and all-reduces the gradients (ring by default: no rank is a bottleneck, each moves about
// 2·N·(P-1)/P per step). Same data, model, batches and learning rate as parameter-server.ts,
// so both reach the same loss.
// Run: cmesh run --nproc-per-node 4 examples/allreduce-training.ts [--algorithm ring|tree|direct]
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { datasetLoss, initParameters, lossAndGradSum, parameterCount, sgdStep } from './_lib/mlp';
import { batchIndices, shardOf } from './_lib/synthetic-data';
import { bytesLine, dataset, lossStr, trainingConfig } from './_lib/training';
import { trafficTotals } from './_lib/traffic';

runMain(async () => {
  const cfg = trainingConfig();
  const algorithm = (cfg.rest.algorithm ?? 'ring') as 'ring' | 'tree' | 'direct';
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();
  const world = dist.getWorldSize();
  const data = dataset(cfg);
  const { shape } = cfg;
  const n = parameterCount(shape);

  // like DistributedDataParallel: rank 0's initial weights go to everyone
  const params = rank === 0 ? initParameters(shape, cfg.initSeed) : new Float32Array(n);
  await dist.broadcast(params, { src: 0 });
  if (rank === 0) {
    console.log(`all-reduce (${algorithm}): ${world} workers, ${n} parameters`);
    console.log(`initial loss: ${lossStr(datasetLoss(shape, params, data))}`);
  }

  const grad = new Float64Array(n);
  const message = new Float32Array(n + 1); // gradient sum, then the shard's loss sum

  await dist.barrier();
  dist.resetTrafficCounters();
  const t0 = performance.now();
  for (let step = 0; step < cfg.steps; step++) {
    const shard = shardOf(batchIndices(step, cfg.batchSize, data.samples), rank, world);
    grad.fill(0);
    const loss = lossAndGradSum(shape, params, data, shard, grad);
    message.set(grad);
    message[n] = loss;
    await dist.allReduce(message, { op: dist.ReduceOp.SUM, algorithm });
    sgdStep(params, message, cfg.lr, cfg.batchSize);
    if (rank === 0 && (step + 1) % cfg.logEvery === 0) {
      console.log(`step ${step + 1} batch loss ${lossStr(message[n] / cfg.batchSize)}`);
    }
  }
  const elapsed = performance.now() - t0;
  const { sent, received } = trafficTotals();

  if (rank === 0) {
    console.log(`final loss: ${lossStr(datasetLoss(shape, params, data))}`);
    console.log(`time per step: ${(elapsed / cfg.steps).toFixed(3)} ms`);
  }
  console.log(bytesLine(rank, sent, received, cfg.steps));
  await dist.destroyProcessGroup();
});
