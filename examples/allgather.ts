// Port of src/ch2/allgather.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/allgather.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  const input = new Float32Array(1).fill(rank); // torch.ones(1) * rank
  // rank==0 => [0]
  // rank==1 => [1]
  // rank==2 => [2]
  // rank==3 => [3]

  const outputsList = [
    new Float32Array(1), // torch.zeros(1)
    new Float32Array(1),
    new Float32Array(1),
    new Float32Array(1),
  ];

  await dist.allGather(outputsList, input);
  console.log(listRepr(outputsList));
  await dist.destroyProcessGroup();
});
