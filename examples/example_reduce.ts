// Port of example_reduce from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_reduce.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleReduce(): Promise<void> {
  const tensor = new Float32Array(5).fill(dist.getRank() + 1);
  console.log(`Before reduce on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.reduce(tensor, { dst: 0, op: dist.ReduceOp.SUM });
  // (the original prints an undefined `rank` here; its output shows the rank)
  console.log(`After reduce on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
}

runMain(async () => {
  await initProcess();
  await exampleReduce();
  await dist.destroyProcessGroup();
});
