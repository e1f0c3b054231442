// Port of src/broadcast.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/broadcast.ts
// The original uses nccl on GPUs (torch.cuda.set_device(rank)); this runs on the CPU data plane
// ('tcp'), so tensors print without device='cuda:N'.
// The original's code broadcasts torch.randn(2, 2) (its printed output came from a larger tensor).
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { randn } from './_lib/random';
import { Shaped } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'tcp' });
  const rank = dist.getRank();

  const tensor = rank === 0 ? randn(4) : new Float32Array(4); // randn(2, 2) / zeros(2, 2)

  console.log(`before rank ${rank}: ${new Shaped(tensor, [2, 2])}\n`);
  await dist.broadcast(tensor, { src: 0 });
  console.log(`after rank ${rank}: ${new Shaped(tensor, [2, 2])}\n`);
  await dist.destroyProcessGroup();
});
