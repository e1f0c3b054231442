// Port of example_scatter from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_scatter.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr, Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleScatter(): Promise<void> {
  let scatterList: Float32Array[] | undefined;
  if (dist.getRank() === 0) {
    scatterList = Array.from({ length: dist.getWorldSize() }, (_, i) => new Float32Array(5).fill(i + 1));
    console.log(`Rank 0: Tensor to scatter: ${listRepr(scatterList)}`);
  } else {
    scatterList = undefined;
  }
  const tensor = new Float32Array(5);
  console.log(`Before scatter on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.scatter(tensor, { scatterList, src: 0 });
  console.log(`After scatter on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
}

runMain(async () => {
  await initProcess();
  await exampleScatter();
  await dist.destroyProcessGroup();
});
