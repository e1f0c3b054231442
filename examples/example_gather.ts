// Port of example_gather from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_gather.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr, Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleGather(): Promise<void> {
  const tensor = new Float32Array(5).fill(dist.getRank() + 1);
  const gatherList = dist.getRank() === 0 ? Array.from({ length: dist.getWorldSize() }, () => new Float32Array(5)) : undefined;
  console.log(`Before gather on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.gather(tensor, { gatherList, dst: 0 });
  if (dist.getRank() === 0) {
    console.log(`After gather on rank 0: ${listRepr(gatherList)}`);
  }
}

runMain(async () => {
  await initProcess();
  await exampleGather();
  await dist.destroyProcessGroup();
});
