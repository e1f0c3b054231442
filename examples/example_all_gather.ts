// Port of example_all_gather from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_all_gather.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr, Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleAllGather(): Promise<void> {
  const tensor = new Float32Array(5).fill(dist.getRank() + 1);
  const gatherList = Array.from({ length: dist.getWorldSize() }, () => new Float32Array(5));
  console.log(`Before all_gather on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.allGather(gatherList, tensor);
  console.log(`After all_gather on rank ${dist.getRank()}: ${listRepr(gatherList)}`);
}

runMain(async () => {
  await initProcess();
  await exampleAllGather();
  await dist.destroyProcessGroup();
});
