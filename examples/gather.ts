// Port of src/ch2/gather.py (large-scale-lm-tutorials).
// Run: cmesh run --nproc-per-node 4 examples/gather.ts
import * as dist from '@cmesh/collectives';
import { runMain } from './_lib/main';
import { listRepr } from './_lib/torch-format';

runMain(async () => {
  await dist.initProcessGroup({ backend: 'gloo' });
  // the original notes nccl has no gather; cmesh's CPU backend has every collective
  const rank = dist.getRank();

  const input = new Float32Array(1).fill(rank); // torch.ones(1) * rank
  // rank==0 => [0]
  // rank==1 => [1]
  // rank==2 => [2]
  // rank==3 => [3]

  if (rank === 0) {
    const outputsList = [0, 1, 2, 3].map(() => new Float32Array(1));
    await dist.gather(input, { gatherList: outputsList, dst: 0 });
    console.log(listRepr(outputsList));
  } else {
    await dist.gather(input, { dst: 0 });
  }
  await dist.destroyProcessGroup();
});
