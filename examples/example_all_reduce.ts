// Port of example_all_reduce from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_all_reduce.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleAllReduce(): Promise<void> {
  const tensor = new Float32Array(5).fill(dist.getRank() + 1);
  console.log(`Before all_reduce on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.allReduce(tensor, { op: dist.ReduceOp.SUM });
  console.log(`After all_reduce on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
}

runMain(async () => {
  await initProcess();
  await exampleAllReduce();
  await dist.destroyProcessGroup();
});
