// Port of example_reduce_scatter from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_reduce_scatter.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr, Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleReduceScatter(): Promise<void> {
  const rank = dist.getRank();
  const worldSize = dist.getWorldSize();
  // [torch.tensor([(rank + 1) * i for i in range(1, 3)]) ** (j + 1) for j in range(world_size)]
  const inputTensor = Array.from({ length: worldSize }, (_, j) => Float32Array.from([1, 2].map((i) => ((rank + 1) * i) ** (j + 1))));
  const outputTensor = new Float32Array(2);
  console.log(`Before ReduceScatter on rank ${rank}: ${listRepr(inputTensor)}`);
  await dist.reduceScatter(outputTensor, inputTensor, { op: dist.ReduceOp.SUM });
  console.log(`After ReduceScatter on rank ${rank}: ${new Shaped(outputTensor)}`);
}

runMain(async () => {
  await initProcess();
  await exampleReduceScatter();
  await dist.destroyProcessGroup();
});
