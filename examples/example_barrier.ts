// Port of example_barrier from "Distributed Training Part 2: Parallel Programming" (English).
// Run: cmesh run --nproc-per-node 3 examples/example_barrier.ts
// The original uses nccl on GPUs (.cuda()); this runs on the CPU data plane ('tcp'), so tensors
// print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain, sleep } from './_lib/main';
import { formatFixed } from './_lib/py-number';

async function initProcess(): Promise<void> {
  await dist.initProcessGroup({ backend: 'tcp' });
}

async function exampleBarrier(): Promise<void> {
  const rank = dist.getRank();
  const tStart = performance.now();
  console.log(`Rank ${rank} sleeps ${rank} seconds.`);
  await sleep(rank * 1000); // Simulate different processing times
  await dist.barrier();
  const delta = (performance.now() - tStart) / 1000;
  console.log(`Rank ${rank} after barrier time delta: ${formatFixed(delta, 4)}`);
}

runMain(async () => {
  await initProcess();
  await exampleBarrier();
  await dist.destroyProcessGroup();
});
