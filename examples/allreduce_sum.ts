// Port of src/ch2/allreduce_sum.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/allreduce_sum.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  const tensor = new Float32Array(4).fill(rank); // torch.ones(2, 2) * rank
  // rank==0 => [[0, 0], [0, 0]]
  // rank==1 => [[1, 1], [1, 1]]
  // rank==2 => [[2, 2], [2, 2]]
  // rank==3 => [[3, 3], [3, 3]]

  await dist.allReduce(tensor, { op: dist.ReduceOp.SUM });

  console.log(`rank ${rank}: ${new Shaped(tensor, [2, 2])}\n`);
  await dist.destroyProcessGroup();
});
