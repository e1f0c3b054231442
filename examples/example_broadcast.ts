// Port of example_broadcast from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_broadcast.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleBroadcast(): Promise<void> {
  const tensor = dist.getRank() === 0 ? Float32Array.from([1, 2, 3, 4, 5]) : new Float32Array(5);
  console.log(`Before broadcast on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
  await dist.broadcast(tensor, { src: 0 });
  console.log(`After broadcast on rank ${dist.getRank()}: ${new Shaped(tensor)}`);
}

runMain(async () => {
  await initProcess();
  await exampleBroadcast();
  await dist.destroyProcessGroup();
});
